"""slurmctld: a one-pod StatefulSet and its headless Service."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.node.layout import CONTROLLER, ENV, NAMES, PATHS, PORTS
from soperator.render.common import (Obj, metadata, object_name, resources, secret_volume, selector_labels,
                                     service_domain, slurm_daemon_probes, tcp_probe)
from soperator.render.configs import controller_host
from soperator.render.identity import identity_annotations, identity_mounts, identity_volumes
from soperator.render.nodes import (CONTROLLER_CAPABILITIES, headless_service, headless_service_name, jail_volumes,
                                    node_pod, persistent_volume, root_security_context, slurm_mounts, slurm_volumes,
                                    stateful_set)
from soperator.render.secrets import jwt_key_secret_name

# slurmrestd refuses to run as root or SlurmUser; it needs no file of its own.
NOBODY = 65534


def spool_volume(cluster: SlurmCluster) -> tuple[list[Obj], list[Obj]]:
    """(pod volumes, volumeClaimTemplates) for StateSaveLocation: a named PVC or one per pod."""
    spool = cluster.spec.controller.spool
    return persistent_volume("spool", spool.claim_name, spool.size, spool.storage_class_name)


def controller_stateful_set(cluster: SlurmCluster) -> Obj:
    spec = cluster.spec
    spool_volumes, claim_templates = spool_volume(cluster)
    container = {
        "name": "slurmctld",
        "image": spec.image("controller"),
        "imagePullPolicy": spec.images.pull_policy,
        "env": [{"name": ENV.component, "value": CONTROLLER},
                {"name": ENV.jail, "value": PATHS.jail}],
        "ports": [{"name": "slurmctld", "containerPort": PORTS.slurmctld, "protocol": "TCP"}],
        "securityContext": root_security_context(CONTROLLER_CAPABILITIES),
        # The jail, read-only, for its accounts: slurmctld resolves job users' groups itself.
        "volumeMounts": slurm_mounts() + [{"name": "spool", "mountPath": PATHS.controller_spool},
                                          {"name": "jail", "mountPath": PATHS.jail, "readOnly": True},
                                          {"name": "jwt-key", "mountPath": PATHS.jwt_key_dir, "readOnly": True},
                                          *identity_mounts(cluster)],
        **slurm_daemon_probes(PORTS.slurmctld, spec.slurm_version),
        "resources": resources(spec.controller),
    }
    volumes = slurm_volumes(cluster) + spool_volumes + jail_volumes(cluster)[:1] + [
        secret_volume("jwt-key", jwt_key_secret_name(cluster), 0o400), *identity_volumes(cluster)]
    pod = node_pod(cluster, spec.controller, container, volumes, grace_seconds=60)
    pod["containers"].append(_slurmrestd(cluster))
    # No config hash: the entrypoint sees the ConfigMap change and runs `scontrol reconfigure`.
    return stateful_set(cluster, CONTROLLER, 1, pod, identity_annotations(cluster), claim_templates)


def controller_service(cluster: SlurmCluster) -> Obj:
    return headless_service(cluster, CONTROLLER,
                            [{"name": "slurmctld", "port": PORTS.slurmctld, "targetPort": PORTS.slurmctld,
                              "protocol": "TCP"}])



def _slurmrestd(cluster: SlurmCluster) -> Obj:
    """The REST door the operator talks to Slurm through. Every request carries a JWT that slurmctld
    checks (rest_auth/jwt); the process itself holds no key and no privilege."""
    return {
        "name": "slurmrestd",
        "image": cluster.spec.image("controller"),
        "imagePullPolicy": cluster.spec.images.pull_policy,
        "command": ["slurmrestd", "-a", "rest_auth/jwt", "-s", "openapi/slurmctld", f"0.0.0.0:{PORTS.slurmrestd}"],
        # SLURM_JWT=daemon: libslurm takes auth/jwt for the callers' tokens; without it, measured,
        # slurmrestd refuses every token ("Rejecting thread config token").
        # slurmrestd would unshare its own IPC and file namespaces; that needs CAP_SYS_ADMIN, which it
        # must not have (measured: "Unable to unshare System V namespace"). Its container is that
        # isolation already: its own IPC namespace, no capability, a read-only root.
        "env": [{"name": "SLURM_CONF", "value": PATHS.slurm_conf},
                {"name": "SLURM_JWT", "value": "daemon"},
                {"name": "SLURMRESTD_SECURITY", "value": "disable_unshare_sysv,disable_unshare_files"}],
        "ports": [{"name": "slurmrestd", "containerPort": PORTS.slurmrestd, "protocol": "TCP"}],
        "securityContext": {"runAsUser": NOBODY, "runAsGroup": NOBODY, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "slurm-configs", "mountPath": PATHS.slurm_config_dir, "readOnly": True}],
        "readinessProbe": tcp_probe(PORTS.slurmrestd, period=5, failures=3),
        "livenessProbe": tcp_probe(PORTS.slurmrestd, period=15, failures=8),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
    }


def rest_service_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, NAMES.rest)


def rest_service(cluster: SlurmCluster) -> Obj:
    """slurmrestd, inside the Kubernetes cluster only (ClusterIP)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(cluster, rest_service_name(cluster), CONTROLLER),
            "spec": {"type": "ClusterIP", "selector": selector_labels(cluster, CONTROLLER),
                     "ports": [{"name": "slurmrestd", "port": PORTS.slurmrestd, "targetPort": PORTS.slurmrestd,
                                "protocol": "TCP"}]}}


def metrics_url(cluster: SlurmCluster) -> str:
    """slurmctld's own HTTP server (metrics, probes): its RPC port, through the headless Service."""
    return f"http://{controller_host(cluster)}.{service_domain(cluster, headless_service_name(cluster, CONTROLLER))}:{PORTS.slurmctld}"


def rest_url(cluster: SlurmCluster) -> str:
    host = f"{rest_service_name(cluster)}.{cluster.namespace}.svc.{cluster.spec.cluster_domain}"
    return f"http://{host}:{PORTS.slurmrestd}"
