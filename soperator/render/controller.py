"""slurmctld: a one-pod StatefulSet and its headless Service."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.render.common import Obj, resources, tcp_probe
from soperator.render.configs import SLURMCTLD_PORT
from soperator.render.nodes import (CONTROLLER, CONTROLLER_CAPABILITIES, headless_service, jail_volumes, node_pod,
                                    root_security_context, slurm_mounts, slurm_volumes, stateful_set)
from soperator.render.paths import PATHS



def _spool(cluster: SlurmCluster) -> tuple[list[Obj], list[Obj]]:
    """(pod volumes, volumeClaimTemplates) for StateSaveLocation: a named PVC or one per pod."""
    spool = cluster.spec.controller.spool
    if spool.claim_name:
        return [{"name": "spool", "persistentVolumeClaim": {"claimName": spool.claim_name}}], []
    claim: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": spool.size}}}
    if spool.storage_class_name:
        claim["storageClassName"] = spool.storage_class_name
    return [], [{"metadata": {"name": "spool"}, "spec": claim}]


def controller_stateful_set(cluster: SlurmCluster) -> Obj:
    spec = cluster.spec
    spool_volumes, claim_templates = _spool(cluster)
    container = {
        "name": "slurmctld",
        "image": spec.images.ref("controller"),
        "imagePullPolicy": spec.images.pull_policy,
        "env": [{"name": "SOPERATOR_COMPONENT", "value": CONTROLLER},
                {"name": "SOPERATOR_JAIL", "value": PATHS.jail}],
        "ports": [{"name": "slurmctld", "containerPort": SLURMCTLD_PORT, "protocol": "TCP"}],
        "securityContext": root_security_context(CONTROLLER_CAPABILITIES),
        # The jail, read-only, for its accounts: slurmctld resolves job users' groups itself.
        "volumeMounts": slurm_mounts() + [{"name": "spool", "mountPath": PATHS.controller_spool},
                                          {"name": "jail", "mountPath": PATHS.jail, "readOnly": True}],
        "readinessProbe": tcp_probe(SLURMCTLD_PORT, period=5, failures=3),
        "livenessProbe": tcp_probe(SLURMCTLD_PORT, period=15, failures=8),
        "resources": resources(spec.controller),
    }
    pod = node_pod(cluster, spec.controller, container,
                   slurm_volumes(cluster) + spool_volumes + jail_volumes(cluster)[:1], grace_seconds=60)
    # No config hash: the entrypoint sees the ConfigMap change and runs `scontrol reconfigure`.
    return stateful_set(cluster, CONTROLLER, 1, pod, {}, claim_templates)


def controller_service(cluster: SlurmCluster) -> Obj:
    return headless_service(cluster, CONTROLLER,
                            [{"name": "slurmctld", "port": SLURMCTLD_PORT, "targetPort": SLURMCTLD_PORT,
                              "protocol": "TCP"}])

