"""Pure renderers: a validated SlurmCluster (plus key material) in, Kubernetes objects out.

Objects come in the operator's apply order: key Secrets, accounting (slurmdbd and its database),
config maps, the populate-jail Job, then the node objects (node_objects: the controller, every node
set's workers and login, with their Services, network policies and disruption budgets).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from soperator.api.cluster import SlurmCluster
from soperator.keys import SshHostKey, generate_db_password, generate_jwt_key
from soperator.render.accounting import accounting_services, slurmdbd_conf_secret, slurmdbd_stateful_set
from soperator.render.common import Obj
from soperator.render.configs import slurm_configs_config_map, sshd_config_map
from soperator.render.disruption import disruption_budgets
from soperator.render.identity import identity_config_map
from soperator.render.controller import controller_service, controller_stateful_set, rest_service
from soperator.render.login import login_headless_service, login_ssh_service, login_stateful_set
from soperator.render.network_policy import controller_ingress_policy, node_egress_policy
from soperator.render.populate_jail import populate_jail_job
from soperator.render.secrets import db_password_secret, jwt_key_secret, munge_key_secret, ssh_host_keys_secret
from soperator.render.worker import worker_service, worker_stateful_sets


@dataclass(frozen=True)
class KeyMaterial:
    munge_key: bytes
    ssh_host_keys: dict[str, SshHostKey]
    jwt_key: bytes = field(default_factory=generate_jwt_key)
    db_password: bytes = field(default_factory=generate_db_password)  # a managed accounting database's


def secrets(cluster: SlurmCluster, keys: KeyMaterial) -> list[Obj]:
    """Only the Secrets the cluster does not bring itself (spec.secrets references)."""
    out = []
    if not cluster.spec.secrets.munge_key:
        out.append(munge_key_secret(cluster, keys.munge_key))
    if not cluster.spec.secrets.ssh_host_keys:
        out.append(ssh_host_keys_secret(cluster, keys.ssh_host_keys))
    if not cluster.spec.secrets.jwt_key:
        out.append(jwt_key_secret(cluster, keys.jwt_key))
    if cluster.spec.accounting.enabled and not cluster.spec.accounting.external:
        out.append(db_password_secret(cluster, keys.db_password))
    return out


def slurmdbd_left_out(cluster: SlurmCluster, keys: KeyMaterial | None) -> bool:
    """slurmdbd's StatefulSet names its config Secret by a hash of the file, password included: without
    the password (no keys; an external database's, in the admin's Secret) it cannot be rendered."""
    return cluster.spec.accounting.enabled and (keys is None or cluster.spec.accounting.external is not None)


def accounting(cluster: SlurmCluster, keys: KeyMaterial | None) -> list[Obj]:
    """slurmdbd and its database, with slurmdbd.conf's Secret when the password is known."""
    if not cluster.spec.accounting.enabled:
        return []
    if slurmdbd_left_out(cluster, keys):
        return accounting_services(cluster)
    conf = slurmdbd_conf_secret(cluster, keys.db_password.decode())
    return [conf, *accounting_services(cluster), slurmdbd_stateful_set(cluster, conf["metadata"]["name"])]


def config_maps(cluster: SlurmCluster, accounting_live: bool = True, blocks: tuple[str, ...] = ()) -> list[Obj]:
    """`accounting_live`: slurmdbd answers, so slurm.conf may name it; `blocks`: a block topology's (see
    configs.slurm_files)."""
    identity = [identity_config_map(cluster)] if cluster.spec.identity else []
    return [slurm_configs_config_map(cluster, accounting_live, blocks), sshd_config_map(cluster), *identity]


def node_objects(cluster: SlurmCluster, replicas: dict[str, int], operator_namespace: str | None = None,
                 parts: dict[str, SlurmCluster] | None = None) -> list[Obj]:
    """The objects of the pods that run Slurm's daemons: the network policies, the controller and its
    Services, every node set's StatefulSet and the workers' Service, login and its Services, the
    disruption budgets.

    `replicas`: every node set's count, as planned (a scale-in holds a StatefulSet above its spec's
    count while its leaving nodes drain: soperator/reconcile/scale_in.py); `spec_replicas` for a render
    that plans nothing. `operator_namespace`: where the operator runs, the only place slurmrestd is
    reached from (None: its pods by label, in any namespace). `parts`: the cluster as the controller,
    the workers and login are rendered, when an upgrade holds one on its older release
    (reconcile/upgrade.py); by default `cluster` for all."""
    part = (parts or {}).get
    # The policies first: no login or worker pod ever runs without its egress policy, no controller
    # without its ingress one.
    return [
        node_egress_policy(cluster), controller_ingress_policy(cluster, operator_namespace),
        controller_service(cluster), rest_service(cluster), controller_stateful_set(part("controller", cluster)),
        worker_service(cluster), *worker_stateful_sets(part("workers", cluster), replicas),
        login_headless_service(cluster), login_ssh_service(cluster), login_stateful_set(part("login", cluster)),
        *disruption_budgets(cluster),
    ]


def spec_replicas(cluster: SlurmCluster) -> dict[str, int]:
    """Each node set at its spec's count: what a render with nothing observed plans."""
    return {n.name: n.replicas for n in cluster.spec.node_sets}


def render_all(cluster: SlurmCluster, keys: KeyMaterial | None, operator_namespace: str | None = None) -> list[Obj]:
    """Every object of the cluster; without keys, the generated Secrets are left out."""
    head = secrets(cluster, keys) if keys is not None else []
    return (head + accounting(cluster, keys) + config_maps(cluster, accounting_live=True) + [populate_jail_job(cluster)]
            + node_objects(cluster, spec_replicas(cluster), operator_namespace))
