"""Login nodes: sshd chrooted into the jail, a headless Service and the user-facing ssh Service."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.node.layout import CONFIG_HASH_ANNOTATION, ENV, LOGIN, PATHS, PORTS
from soperator.render.common import (Obj, config_map_volume, metadata, object_name, resources,
                                     secret_volume, selector_labels, tcp_probe)
from soperator.render.configs import conf_server, sshd_config_hash, sshd_config_name
from soperator.render.identity import identity_annotations, identity_mounts, identity_volumes
from soperator.render.nodes import (LOGIN_CAPABILITIES, headless_service, jail_mounts, jail_volumes,
                                    node_pod, node_security_context, slurm_mounts, slurm_volumes, stateful_set)
from soperator.render.secrets import ssh_host_keys_secret_name


def login_security_context(cluster: SlurmCluster) -> Obj:
    """In a user namespace /proc is unmasked, as on user-namespaced workers (render/worker.py): the jail
    plugin mounts each session's own procfs, and masks it itself."""
    context = node_security_context(LOGIN_CAPABILITIES)
    if not cluster.spec.login.host_users:
        context["procMount"] = "Unmasked"
    return context


def login_stateful_set(cluster: SlurmCluster) -> Obj:
    spec = cluster.spec
    container = {
        "name": "sshd",
        "image": spec.image("login"),
        "imagePullPolicy": spec.images.pull_policy,
        "env": [{"name": ENV.component, "value": LOGIN},
                {"name": ENV.jail, "value": PATHS.jail},
                {"name": ENV.allow_user_namespaces,
                 "value": "true" if spec.plug_stack.allow_user_namespaces else "false"},
                {"name": ENV.max_user_processes, "value": str(spec.login.max_user_processes)},
                {"name": ENV.session_limits, "value": "true" if spec.login.session_limits.enabled else "false"},
                {"name": ENV.conf_server, "value": conf_server(cluster)},
                {"name": ENV.node_name, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "ports": [{"name": "ssh", "containerPort": PORTS.ssh, "protocol": "TCP"}],
        "securityContext": login_security_context(cluster),
        "volumeMounts": slurm_mounts(configs=False) + jail_mounts(cluster) + [
            {"name": "sshd-config", "mountPath": PATHS.sshd_config_dir, "readOnly": True},
            {"name": "ssh-host-keys", "mountPath": PATHS.ssh_host_keys, "readOnly": True},
            *identity_mounts(cluster),
        ],
        "readinessProbe": tcp_probe(PORTS.ssh, period=5, failures=3),
        "livenessProbe": tcp_probe(PORTS.ssh, period=15, failures=8),
        "resources": resources(spec.login),
    }
    volumes = slurm_volumes(cluster, configs=False) + jail_volumes(cluster) + [
        config_map_volume("sshd-config", sshd_config_name(cluster)),
        secret_volume("ssh-host-keys", ssh_host_keys_secret_name(cluster), 0o600),
        *identity_volumes(cluster),
    ]
    pod = node_pod(cluster, spec.login, container, volumes, grace_seconds=30)
    if not spec.login.host_users:
        pod["hostUsers"] = False
    # sshd reads its config once: a change to it rolls the login pods (Slurm's reaches sackd by reconfigure).
    digest = sshd_config_hash(cluster)
    return stateful_set(cluster, LOGIN, spec.login.replicas, pod,
                        {CONFIG_HASH_ANNOTATION: digest, **identity_annotations(cluster)})


def login_headless_service(cluster: SlurmCluster) -> Obj:
    return headless_service(cluster, LOGIN, [{"name": "ssh", "port": PORTS.ssh, "targetPort": PORTS.ssh,
                                              "protocol": "TCP"}])


def login_ssh_service_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, LOGIN)


def login_ssh_service(cluster: SlurmCluster) -> Obj:
    svc = cluster.spec.login.service
    port: Obj = {"name": "ssh", "port": PORTS.ssh, "targetPort": PORTS.ssh, "protocol": "TCP"}
    if svc.node_port is not None:
        port["nodePort"] = svc.node_port
    spec: Obj = {"type": svc.type, "selector": selector_labels(cluster, LOGIN), "ports": [port]}
    if svc.load_balancer_source_ranges:
        spec["loadBalancerSourceRanges"] = list(svc.load_balancer_source_ranges)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(cluster, login_ssh_service_name(cluster), LOGIN, svc.annotations),
            "spec": spec}
