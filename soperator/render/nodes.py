"""Pieces every Slurm node pod shares: config and key volumes, DNS search domains, the jail mounts."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.api.common import ComponentBase
from soperator.api.spec import JailSubMount
from soperator.node.layout import CONTROLLER, LOGIN, NAMES, NODE_SET_LABEL, PATHS, WORKER
from soperator.render.common import (Obj, config_map_volume, labels, metadata, object_name, scheduling,
                                     secret_volume, selector_labels, service_domain)
from soperator.render.configs import slurm_configs_name
from soperator.render.secrets import munge_key_secret_name


def headless_service_name(cluster: SlurmCluster, component: str) -> str:
    return object_name(cluster, NAMES.login_headless if component == LOGIN else component)


def dns_config(cluster: SlurmCluster) -> Obj:
    """Slurm node names are bare pod names; these search domains make them resolve cluster-wide."""
    searches = [service_domain(cluster, headless_service_name(cluster, c))
                for c in (CONTROLLER, WORKER, LOGIN)]
    return {"searches": searches}


def slurm_volumes(cluster: SlurmCluster, configs: bool = True) -> list[Obj]:
    """The munge key, and the Slurm config files where slurmctld or scontrol read them from disk
    (`configs`); workers and login nodes fetch them from slurmctld instead (configless)."""
    config = [config_map_volume("slurm-configs", slurm_configs_name(cluster))] if configs else []
    return config + [secret_volume("munge-key", munge_key_secret_name(cluster), 0o400)]


def slurm_mounts(configs: bool = True) -> list[Obj]:
    config = [{"name": "slurm-configs", "mountPath": PATHS.slurm_config_dir, "readOnly": True}] if configs else []
    return config + [{"name": "munge-key", "mountPath": PATHS.munge_key_dir, "readOnly": True}]


def persistent_volume(name: str, claim_name: str | None, size: str,
                      storage_class_name: str | None) -> tuple[list[Obj], list[Obj]]:
    """(pod volumes, volumeClaimTemplates) for a pod's own data: a named PVC, or one made per pod."""
    if claim_name:
        return [{"name": name, "persistentVolumeClaim": {"claimName": claim_name}}], []
    claim: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class_name:
        claim["storageClassName"] = storage_class_name
    return [], [{"metadata": {"name": name}, "spec": claim}]


def jail_volumes(cluster: SlurmCluster, extra: list[JailSubMount] = ()) -> list[Obj]:
    """The jail and its sub-mounts (the cluster's, then `extra`: a node set's own)."""
    jail = cluster.spec.jail
    if jail.volume.host_path:
        source: Obj = {"hostPath": {"path": jail.volume.host_path, "type": "Directory"}}
    else:
        claim = jail.volume.claim_name or object_name(cluster, NAMES.jail)
        source = {"persistentVolumeClaim": {"claimName": claim}}
    volumes = [{"name": "jail", **source}]
    for sub in [*jail.sub_mounts, *extra]:
        volumes.append({"name": f"jail-sub-{sub.name}",
                        "persistentVolumeClaim": {"claimName": sub.claim_name, "readOnly": sub.read_only}})
    return volumes


def jail_mount(name: str, path: str, read_only: bool = False) -> Obj:
    return {"name": name, "mountPath": PATHS.jail + path.rstrip("/"), "readOnly": read_only}


def jail_mounts(cluster: SlurmCluster, extra: list[JailSubMount] = ()) -> list[Obj]:
    mounts = [{"name": "jail", "mountPath": PATHS.jail}]
    for sub in [*cluster.spec.jail.sub_mounts, *extra]:
        mounts.append(jail_mount(f"jail-sub-{sub.name}", sub.mount_path, sub.read_only))
    return mounts


def headless_service(cluster: SlurmCluster, component: str, ports: list[Obj]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(cluster, headless_service_name(cluster, component), component),
        "spec": {
            "clusterIP": "None",
            # Slurm daemons must find each other before they report ready.
            "publishNotReadyAddresses": True,
            "selector": selector_labels(cluster, component),
            "ports": ports,
        },
    }


# What the node daemons and the jail need: mounts and unshare (SYS_ADMIN), chroot into the jail for
# each job step and each ssh session (SYS_CHROOT), dropping to the job's or session's user (SETUID,
# SETGID), root reading and chowning users' files (DAC_OVERRIDE, CHOWN), signalling a cancelled
# job's steps (KILL), shrinking a job task's bounding set (SETPCAP); sshd also binds port 22.
# bench/capabilities.py measures it: the e2e user path fails without any one of them (and passed
# without FOWNER, now gone).
NODE_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETPCAP", "SETUID", "SYS_ADMIN", "SYS_CHROOT")
LOGIN_CAPABILITIES = NODE_CAPABILITIES + ("NET_BIND_SERVICE",)


# The controller and the populate Job's Slurm steps start munged as its user with a key they put in
# its 0700 directory; slurmctld drops to SlurmUser. The supervisor (root) must be able to SIGTERM
# them (KILL): without it slurmctld was never told to save its state when its pod stopped, died with
# the container, and the new slurmctld started its running job again (measured on the real node).
# No mount, so the default AppArmor profile stays.
CONTROLLER_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID")


def root_security_context(capabilities: tuple[str, ...]) -> Obj:
    """Root in the container with exactly these capabilities and nothing to gain by exec: what every
    pod that need not mount gets (controller, populate-jail and its Slurm steps)."""
    return {"runAsUser": 0, "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": sorted(capabilities)},
            "seccompProfile": {"type": "RuntimeDefault"}}


def node_security_context(capabilities: tuple[str, ...]) -> Obj:
    """Not privileged: the container sees only its own devices (and those the device plugin gives
    it), a read-only /sys, and the runtime's default seccomp filter, which allows mount and unshare
    only to a process holding CAP_SYS_ADMIN, and chroot only with CAP_SYS_CHROOT (containerd's also
    refuses pivot_root, so the jail is entered by moving it over / and chrooting). AppArmor's default profile forbids mount
    whatever the capabilities, so it is off for these containers."""
    return {"privileged": False, "capabilities": {"drop": ["ALL"], "add": sorted(capabilities)},
            "seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "Unconfined"}}


def node_pod(cluster: SlurmCluster, component: ComponentBase, container: Obj, volumes: list[Obj],
             grace_seconds: int) -> Obj:
    """The pod spec every Slurm node shares around its one container."""
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "dnsConfig": dns_config(cluster),
        "terminationGracePeriodSeconds": grace_seconds,
        "containers": [{**container, "terminationMessagePath": PATHS.termination_log}],
        "volumes": volumes,
        **pull_secrets(cluster),
        **scheduling(component),
    }


def pull_secrets(cluster: SlurmCluster) -> Obj:
    secrets = cluster.spec.images.pull_secrets
    return {"imagePullSecrets": [{"name": s} for s in secrets]} if secrets else {}


def stateful_set(cluster: SlurmCluster, component: str, replicas: int, pod_spec: Obj,
                 annotations: dict[str, str], claim_templates: list[Obj] | None = None,
                 node_set: str | None = None) -> Obj:
    """One StatefulSet of `component`; a worker one per node set, named and selected by it."""
    own = {NODE_SET_LABEL: node_set} if node_set else {}
    spec: Obj = {
        "replicas": replicas,
        "serviceName": headless_service_name(cluster, component),
        # Slurm nodes are independent; do not start them one by one.
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {**selector_labels(cluster, component), **own}},
        # Workers are replaced by the operator, drained first (soperator/reconcile/rollout.py).
        "updateStrategy": {"type": "OnDelete" if node_set else "RollingUpdate"},
        "template": {
            # No empty map: the apiserver drops it, and the no-op check would then see a difference.
            "metadata": {"labels": {**labels(cluster, component), **own},
                         **({"annotations": dict(sorted(annotations.items()))} if annotations else {})},
            "spec": pod_spec,
        },
    }
    if claim_templates:
        spec["volumeClaimTemplates"] = claim_templates
    meta = metadata(cluster, object_name(cluster, node_set or component), component)
    meta["labels"].update(own)
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": spec}
