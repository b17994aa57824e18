"""Config files (jinja2 templates) and the ConfigMaps that carry them."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import jinja2

from soperator import __version__
from soperator.api import releases
from soperator.api.cluster import SlurmCluster
from soperator.api.slurm_config import ActiveCheck, uses_cgroups
from soperator.api.spec import NodeSetSpec
from soperator.node.layout import (CONTROLLER, LOGIN, NAMES, PATHS, PORTS, ROOT_KEYS_FILE, SLURM_CONFIGS, SLURMDBD,
                                   SSH_HOST_KEY_TYPES, SSHD_CONFIG_FILE, PAM_SSHD_FILE, member_name)
from soperator.render.common import Obj, content_hash, metadata, object_name

# slurm.conf's power saving while a node set autoscales (templates/slurm.conf.j2). The programs do
# nothing: the operator reads the nodes' power states through slurmrestd and runs the pods. SuspendTime
# enables Slurm's resume of powered-down nodes for jobs, and is too long ever to pass (the largest
# finite value), so Slurm powers nothing down by itself: the operator releases nodes from the
# StatefulSet's top, where Slurm would pick any idle node.
# SuspendTime: below NO_VAL (2**32 - 2) and INFINITE (2**32 - 1), which would disable it.
POWER_SAVING = {"program": "/bin/true", "suspend_time": 2**32 - 3, "suspend_timeout": 10}
SLURM_FILES = ("slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf")
# topology.yaml's one topology, and names no Kubernetes label value can be (a value starts and ends
# alphanumeric), so no node's switch or block is ever taken for them.
TOPOLOGY_NAME = "default"
ROOT_SWITCH = "_root"
NO_BLOCK = "_none"
UNPLACED = "_unplaced"
# sssd.conf's one domain: users are `alice`, not `alice@directory` (use_fully_qualified_names is off).
IDENTITY_DOMAIN = "directory"
# In slurm.conf when it names slurmdbd (templates/slurm.conf.j2).
ACCOUNTING_LINE = "AccountingStorageType=accounting_storage/slurmdbd"


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("soperator", "templates"),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def controller_host(cluster: SlurmCluster) -> str:
    """slurmctld's host (slurm.conf's SlurmctldHost, the conf server, the metrics URL): the controller
    StatefulSet's first member. The one place that says which member runs slurmctld; a backup slurmctld
    would be another member (docs/where-to-change.md)."""
    return member_name(object_name(cluster, CONTROLLER), 0)


def conf_server(cluster: SlurmCluster) -> str:
    """Where slurmd and sackd fetch the configuration (configless)."""
    return f"{controller_host(cluster)}:{PORTS.slurmctld}"


def node_gres(node_set: NodeSetSpec) -> list[str]:
    if not node_set.gpus:
        return list(node_set.gres)
    gpu = f"gpu:{node_set.gpu_type}:{node_set.gpus}" if node_set.gpu_type else f"gpu:{node_set.gpus}"
    return [gpu, *node_set.gres]


def worker_node_conf(node_set: NodeSetSpec) -> str:
    """What a worker's slurmd registers with (`slurmd -Z --conf`): the pod's CPUs and memory as the
    spec gives them (a container sees the whole machine's), its gres, its node set and features."""
    gres = node_gres(node_set)
    features = [node_set.name, *(f for f in node_set.features if f != node_set.name)]
    parts = [f"Feature={','.join(features)}", f"CPUs={node_set.cpus}", f"RealMemory={node_set.real_memory_mib}"]
    return " ".join(parts + ([f"Gres={','.join(gres)}"] if gres else []))


def check_job_script(check: ActiveCheck, why_chars: int) -> str:
    """An active check's batch script (reconcile/checks.py). The program is a ProgramPath (letters,
    digits, '+', '.', '_', '-' and '/'): nothing a shell would read as more than a path."""
    return _env().get_template("check_job.sh.j2").render(name=check.name, program=check.program,
                                                         why_chars=why_chars)


def enroot_conf(cluster: SlurmCluster, node_set: NodeSetSpec) -> str:
    """enroot.conf of a node set with Pyxis: the worker entrypoint binds it over the jail's."""
    pyxis = node_set.pyxis
    return _env().get_template("enroot.conf.j2").render(
        name=cluster.name, namespace=cluster.namespace, version=__version__, node_set=node_set.name,
        paths=PATHS, credentials=pyxis.registry_credentials_secret, settings=pyxis.enroot_config,
    ).rstrip("\n") + "\n"


def placeholder_node_name(cluster: SlurmCluster, node_set: NodeSetSpec) -> str:
    """A FUTURE record with the node set's feature and hardware, so that a job for the node set pends
    for nodes rather than being refused while it has no worker (replicas 0). It never
    registers; not a pod name (those end in an ordinal)."""
    return f"{cluster.name}-{node_set.name}-future"


def cloud_node_names(cluster: SlurmCluster, node_set: NodeSetSpec) -> str:
    """An autoscaling node set's Slurm records, as a hostlist: its pods' names up to autoscale.max, the
    StatefulSet's ordinals (render/worker.py names it alike)."""
    prefix, last = object_name(cluster, node_set.name), node_set.autoscale.max - 1
    return member_name(prefix, 0) if last == 0 else f"{prefix}-[0-{last}]"  # a hostlist of the members


def _context(cluster: SlurmCluster, accounting_live: bool = True) -> dict:
    node_sets = cluster.spec.node_sets
    gres_types = sorted({g.split(":", 1)[0] for n in node_sets for g in node_gres(n)})
    return {
        "name": cluster.name, "namespace": cluster.namespace, "version": __version__,
        "release": cluster.spec.slurm_version,
        "openmetrics": releases.at_least(cluster.spec.slurm_version, releases.OPENMETRICS),
        # 26.05 warns without it; 24.11 stops at it.
        "health_check_timeout": releases.at_least(cluster.spec.slurm_version, releases.HEALTH_CHECK_TIMEOUT),
        "paths": PATHS, "ports": PORTS, "ssh_host_key_types": SSH_HOST_KEY_TYPES,
        "cfg": cluster.spec.slurm_config, "node_sets": node_sets,
        "all_node_sets": [n.name for n in node_sets],
        "partitions": cluster.spec.partitions, "health": cluster.spec.health_check,
        "plug_stack": cluster.spec.plug_stack, "pyxis": any(n.pyxis.enabled for n in node_sets),
        "cgroup": cluster.spec.cgroup_config, "uses_cgroups": uses_cgroups(cluster.spec.slurm_config),
        "login": cluster.spec.login, "identity": cluster.spec.identity,
        "controller_host": controller_host(cluster), "gres_types": gres_types,
        "placeholders": {n.name: (placeholder_node_name(cluster, n), worker_node_conf(n)) for n in node_sets},
        "cloud": {n.name: cloud_node_names(cluster, n) for n in node_sets if n.autoscale},
        "power": POWER_SAVING,
        "accounting": cluster.spec.accounting.enabled and accounting_live,
        "slurmdbd_address": slurmdbd_address(cluster),
    }


def _render(template: str, cluster: SlurmCluster, accounting_live: bool = True) -> str:
    return _env().get_template(f"{template}.j2").render(**_context(cluster, accounting_live)).rstrip("\n") + "\n"


def slurm_files(cluster: SlurmCluster, accounting_live: bool = True, blocks: tuple[str, ...] = ()) -> dict[str, str]:
    """`accounting_live` False keeps slurm.conf's accounting lines out until slurmdbd answers: a
    slurmctld started with priority/multifactor and no slurmdbd to read associations from exits
    ("It appears you don't have any association data from your database"; measured on the real node).
    `blocks`: a block topology's blocks, the values of its label on the Kubernetes nodes."""
    files = {f: _render(f, cluster, accounting_live) for f in SLURM_FILES}
    if cluster.spec.topology:
        files["topology.yaml"] = topology_yaml(cluster, blocks)
    return files


def topology_yaml(cluster: SlurmCluster, blocks: tuple[str, ...] = ()) -> str:
    """A tree's root switch, or a block topology's blocks (Slurm refuses to start with none: a
    placeholder no label value can name stands in while no Kubernetes node has the label).
    Autoscaling records wait under a unit of their own, UNPLACED, until their pods run: a node in no
    unit is refused to every multi-node job (measured on 26.05: "Requested node configuration is not
    available", at submission), and a powered-down record has no Kubernetes node to be placed by."""
    unplaced = [cloud_node_names(cluster, n) for n in cluster.spec.node_sets if n.autoscale]
    return _env().get_template("topology.yaml.j2").render(
        name=cluster.name, namespace=cluster.namespace, version=__version__, topology=cluster.spec.topology,
        topology_name=TOPOLOGY_NAME, root_switch=ROOT_SWITCH, unplaced_unit=UNPLACED, unplaced=unplaced,
        blocks=sorted(blocks) or ([] if unplaced else [NO_BLOCK]),
    ).rstrip("\n") + "\n"


def slurmdbd_host(cluster: SlurmCluster) -> str:
    """The slurmdbd pod's host name, its StatefulSet's one member: slurmdbd.conf's DbdHost must be it."""
    return member_name(object_name(cluster, SLURMDBD), 0)


def slurmdbd_address(cluster: SlurmCluster) -> str:
    """Where slurmctld reaches slurmdbd (AccountingStorageHost): the pod in its headless Service."""
    return (f"{slurmdbd_host(cluster)}.{object_name(cluster, SLURMDBD)}.{cluster.namespace}.svc."
            f"{cluster.spec.cluster_domain}")


@dataclass(frozen=True)
class Storage:
    """Where slurmdbd keeps the accounting records (a MariaDB/MySQL database)."""

    host: str
    port: int
    user: str
    password: str
    database: str = "slurm_acct_db"


def slurmdbd_conf(cluster: SlurmCluster, dbd_host: str, storage: Storage) -> str:
    """slurmdbd.conf: it carries the password, so it goes into a Secret, never a ConfigMap."""
    if not storage.password or any(c.isspace() or c in "#\"'" for c in storage.password):
        raise ValueError("the database password must be non-empty, without spaces, quotes or '#' "
                         "(slurmdbd.conf cannot hold them)")
    return _env().get_template("slurmdbd.conf.j2").render(
        name=cluster.name, namespace=cluster.namespace, version=__version__, dbd_host=dbd_host,
        paths=PATHS, ports=PORTS, storage=storage).rstrip("\n") + "\n"


def sshd_files(cluster: SlurmCluster) -> dict[str, str]:
    keys = "".join(f"{k}\n" for k in cluster.spec.login.root_ssh_public_keys)
    return {SSHD_CONFIG_FILE: _render("sshd_config", cluster), ROOT_KEYS_FILE: keys,
            PAM_SSHD_FILE: _render("pam_sshd", cluster)}


def sssd_conf(cluster: SlurmCluster) -> str:
    """spec.identity's sssd.conf, without the bind credentials (the node adds them)."""
    identity = cluster.spec.identity
    return _env().get_template("sssd.conf.j2").render(
        name=cluster.name, namespace=cluster.namespace, version=__version__, domain=IDENTITY_DOMAIN, paths=PATHS,
        identity=identity, ldap=identity.ldap).rstrip("\n") + "\n"


def slurm_configs_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, NAMES.slurm_configs)


def sshd_config_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, NAMES.sshd_config)


def slurm_configs_config_map(cluster: SlurmCluster, accounting_live: bool = True, blocks: tuple[str, ...] = ()) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(cluster, slurm_configs_name(cluster), SLURM_CONFIGS),
            "data": slurm_files(cluster, accounting_live, blocks)}


def sshd_config_map(cluster: SlurmCluster) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(cluster, sshd_config_name(cluster), LOGIN),
            "data": sshd_files(cluster)}


def sshd_config_hash(cluster: SlurmCluster) -> str:
    return content_hash(f"{k}\n{v}" for k, v in sorted(sshd_files(cluster).items()))
