"""slurmd: the worker StatefulSet (one pod per Slurm node) and its headless Service."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.render.common import Obj, resources, tcp_probe
from soperator.render.configs import conf_server, worker_node_conf
from soperator.render.nodes import (NODE_CAPABILITIES, WORKER, headless_service, jail_mounts, jail_volumes,
                                    node_pod, node_security_context, slurm_mounts, slurm_volumes, stateful_set)
from soperator.render.paths import PATHS

SLURMD_PORT = 6818
GPU_RESOURCE = "nvidia.com/gpu"


def worker_stateful_set(cluster: SlurmCluster) -> Obj:
    spec = cluster.spec
    workers = spec.workers
    gpu_limit = {GPU_RESOURCE: str(workers.gpus)} if workers.gpus else {}
    container = {
        "name": "slurmd",
        "image": spec.images.ref("worker"),
        "imagePullPolicy": spec.images.pull_policy,
        "env": [{"name": "SOPERATOR_COMPONENT", "value": WORKER},
                {"name": "SOPERATOR_JAIL", "value": PATHS.jail},
                {"name": "SOPERATOR_CONF_SERVER", "value": conf_server(cluster)},
                {"name": "SOPERATOR_SLURMD_CONF", "value": worker_node_conf(cluster)}],
        "ports": [{"name": "slurmd", "containerPort": SLURMD_PORT, "protocol": "TCP"}],
        "securityContext": node_security_context(NODE_CAPABILITIES),
        "volumeMounts": slurm_mounts(configs=False) + jail_mounts(cluster) + [
            {"name": "spool", "mountPath": PATHS.worker_spool},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
        "readinessProbe": tcp_probe(SLURMD_PORT, period=5, failures=3),
        "livenessProbe": tcp_probe(SLURMD_PORT, period=15, failures=8),
        "resources": resources(workers, gpu_limit),
    }
    volumes = slurm_volumes(cluster, configs=False) + jail_volumes(cluster) + [
        {"name": "spool", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": workers.shared_memory_size}},
    ]
    # Running steps get KillWait to stop before the pod is torn down.
    pod = node_pod(cluster, workers, container, volumes, grace_seconds=spec.slurm_config.kill_wait + 30)
    # No config hash: a Slurm config change reaches slurmd by reconfigure, and scaling is registration.
    return stateful_set(cluster, WORKER, workers.replicas, pod, {})


def worker_service(cluster: SlurmCluster) -> Obj:
    return headless_service(cluster, WORKER, [{"name": "slurmd", "port": SLURMD_PORT,
                                               "targetPort": SLURMD_PORT, "protocol": "TCP"}])
