"""Config files (jinja2 templates) and the ConfigMaps that carry them."""
from __future__ import annotations

from functools import lru_cache

import jinja2

from soperator import __version__
from soperator.api.cluster import SlurmCluster
from soperator.render.common import Obj, content_hash, metadata, object_name
from soperator.render.paths import PATHS

SLURM_FILES = ("slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf")


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("soperator", "templates"),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


SLURMCTLD_PORT = 6817


def controller_host(cluster: SlurmCluster) -> str:
    return f"{object_name(cluster, 'controller')}-0"


def conf_server(cluster: SlurmCluster) -> str:
    """Where slurmd and sackd fetch the configuration (configless)."""
    return f"{controller_host(cluster)}:{SLURMCTLD_PORT}"


def worker_group(cluster: SlurmCluster) -> str:
    """The feature every worker of this cluster registers with, naming its group (its StatefulSet)."""
    return object_name(cluster, "worker")


def _nodesets(cluster: SlurmCluster) -> dict[str | None, str]:
    """NodeSet name per partition node feature (None: every worker)."""
    features = {p.node_feature for p in cluster.spec.partitions if p.node_feature}
    return {None: "workers", **{f: f"with_{f}" for f in sorted(features)}}


def _node_gres(cluster: SlurmCluster) -> list[str]:
    workers = cluster.spec.workers
    gpu = f"gpu:{workers.gpu_type}:{workers.gpus}" if workers.gpu_type else f"gpu:{workers.gpus}"
    return ([gpu] if workers.gpus else []) + list(workers.gres)


def worker_node_conf(cluster: SlurmCluster) -> str:
    """What a worker's slurmd registers with (`slurmd -Z --conf`): the pod's CPUs and memory as the
    spec gives them (a container sees the whole machine's), its gres, its group and features."""
    workers = cluster.spec.workers
    gres = _node_gres(cluster)
    parts = [f"Feature={','.join([worker_group(cluster), *workers.features])}", f"CPUs={workers.cpus}",
             f"RealMemory={workers.real_memory_mib}"]
    return " ".join(parts + ([f"Gres={','.join(gres)}"] if gres else []))


def _context(cluster: SlurmCluster) -> dict:
    workers = cluster.spec.workers
    gres_types = sorted({g.split(":", 1)[0] for g in _node_gres(cluster)})
    return {
        "name": cluster.name, "namespace": cluster.namespace, "version": __version__,
        "paths": PATHS, "cfg": cluster.spec.slurm_config, "workers": workers,
        "partitions": cluster.spec.partitions, "health": cluster.spec.health_check,
        "plug_stack": cluster.spec.plug_stack, "cgroup": cluster.spec.cgroup_config, "login": cluster.spec.login,
        "controller_host": controller_host(cluster), "worker_group": worker_group(cluster),
        "nodesets": _nodesets(cluster), "gres_types": gres_types,
        "feature_nodesets": sorted((f, n) for f, n in _nodesets(cluster).items() if f),
    }


def _render(template: str, cluster: SlurmCluster) -> str:
    return _env().get_template(f"{template}.j2").render(**_context(cluster)).rstrip("\n") + "\n"


def slurm_files(cluster: SlurmCluster) -> dict[str, str]:
    return {f: _render(f, cluster) for f in SLURM_FILES}


def sshd_files(cluster: SlurmCluster) -> dict[str, str]:
    keys = "".join(f"{k}\n" for k in cluster.spec.login.root_ssh_public_keys)
    return {"sshd_config": _render("sshd_config", cluster), "root_authorized_keys": keys}


def slurm_configs_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, "slurm-configs")


def sshd_config_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, "sshd-config")


def slurm_configs_config_map(cluster: SlurmCluster) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(cluster, slurm_configs_name(cluster), "slurm-configs"),
            "data": slurm_files(cluster)}


def sshd_config_map(cluster: SlurmCluster) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(cluster, sshd_config_name(cluster), "login"),
            "data": sshd_files(cluster)}


def sshd_config_hash(cluster: SlurmCluster) -> str:
    return content_hash(f"{k}\n{v}" for k, v in sorted(sshd_files(cluster).items()))
