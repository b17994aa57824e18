"""Accounting: slurmdbd (a one-pod StatefulSet of the controller image) and, unless the spec names an
external database, its MariaDB (the `database` image) on a PVC. The database password lives only in
Secrets: the password Secret (generated once like the munge key, or the user's) and slurmdbd.conf's."""
from __future__ import annotations

import base64
import hashlib

from soperator.api.cluster import SlurmCluster
from soperator.node.layout import DATABASE, ENV, NAMES, PATHS, PORTS, SLURMDBD, SLURMDBD_CONF_FILE
from soperator.render.common import Obj, metadata, object_name, resources, secret_volume, selector_labels, tcp_probe
from soperator.render.configs import Storage, slurmdbd_conf, slurmdbd_host
from soperator.render.secrets import db_password_secret_name
from soperator.render.nodes import (CONTROLLER_CAPABILITIES, headless_service, node_pod,
                                    persistent_volume, root_security_context, slurm_mounts, slurm_volumes,
                                    stateful_set)

MANAGED_DB_USER = "slurm"
MANAGED_DB_NAME = "slurm_acct_db"


def storage(cluster: SlurmCluster, password: str) -> Storage:
    external = cluster.spec.accounting.external
    if external:
        return Storage(external.host, external.port, external.user, password, external.database)
    host = f"{object_name(cluster, DATABASE)}.{cluster.namespace}.svc.{cluster.spec.cluster_domain}"
    return Storage(host, PORTS.database, MANAGED_DB_USER, password, MANAGED_DB_NAME)


def slurmdbd_conf_secret(cluster: SlurmCluster, password: str) -> Obj:
    """Immutable, named by its content's hash: the operator only ever creates Secrets (its RBAC has no
    patch on them), and a changed password (an external database's) makes a new one, which rolls
    slurmdbd's pod. Rendered from the password Secret on each reconcile."""
    conf = slurmdbd_conf(cluster, slurmdbd_host(cluster), storage(cluster, password))
    name = f"{object_name(cluster, NAMES.slurmdbd_conf)}-{hashlib.sha256(conf.encode()).hexdigest()[:10]}"
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "immutable": True,
            "metadata": metadata(cluster, name, SLURMDBD),
            "data": {SLURMDBD_CONF_FILE: base64.b64encode(conf.encode()).decode()}}


def _pod(cluster: SlurmCluster, name: str, image: str, port: int, env: list[Obj], mounts: list[Obj],
         volumes: list[Obj]) -> Obj:
    spec = cluster.spec
    container = {
        "name": name, "image": image, "imagePullPolicy": spec.images.pull_policy,
        "env": env, "ports": [{"name": name, "containerPort": port, "protocol": "TCP"}],
        # Root with the controller's capabilities: each daemon drops to its own user (slurm, mysql).
        "securityContext": root_security_context(CONTROLLER_CAPABILITIES),
        "volumeMounts": mounts,
        "readinessProbe": tcp_probe(port, period=5, failures=3),
        "livenessProbe": tcp_probe(port, period=15, failures=8),
        "resources": resources(spec.controller),
    }
    return node_pod(cluster, spec.controller, container, volumes, grace_seconds=60)


def slurmdbd_stateful_set(cluster: SlurmCluster, conf_secret: str) -> Obj:
    pod = _pod(cluster, SLURMDBD, cluster.spec.image("controller"), PORTS.slurmdbd,
               [{"name": ENV.component, "value": SLURMDBD}],
               slurm_mounts(configs=False) + [{"name": "slurmdbd-conf", "mountPath": PATHS.slurmdbd_conf_dir,
                                               "readOnly": True}],
               slurm_volumes(cluster, configs=False) + [
                   secret_volume("slurmdbd-conf", conf_secret, 0o400)])
    return stateful_set(cluster, SLURMDBD, 1, pod, {})


def slurmdbd_service(cluster: SlurmCluster) -> Obj:
    return headless_service(cluster, SLURMDBD, [{"name": SLURMDBD, "port": PORTS.slurmdbd,
                                                 "targetPort": PORTS.slurmdbd, "protocol": "TCP"}])


def database_volume(cluster: SlurmCluster) -> tuple[list[Obj], list[Obj]]:
    """(pod volumes, volumeClaimTemplates) for the managed database's data: a named PVC or one per pod."""
    managed = cluster.spec.accounting.managed
    return persistent_volume("data", managed.claim_name, managed.size, managed.storage_class_name)


def database_stateful_set(cluster: SlurmCluster) -> Obj:
    data_volumes, claim_templates = database_volume(cluster)
    pod = _pod(cluster, DATABASE, cluster.spec.image("database"), PORTS.database,
               [{"name": ENV.component, "value": DATABASE},
                {"name": ENV.db_name, "value": MANAGED_DB_NAME},
                {"name": ENV.db_user, "value": MANAGED_DB_USER}],
               [{"name": "data", "mountPath": PATHS.db_data},
                {"name": "db-password", "mountPath": PATHS.db_password_dir, "readOnly": True}],
               data_volumes + [secret_volume("db-password", db_password_secret_name(cluster), 0o400)])
    return stateful_set(cluster, DATABASE, 1, pod, {}, claim_templates)


def database_service(cluster: SlurmCluster) -> Obj:
    """A ClusterIP Service: slurmdbd is its only client."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(cluster, object_name(cluster, DATABASE), DATABASE),
            "spec": {"selector": selector_labels(cluster, DATABASE),
                     "ports": [{"name": "mysql", "port": PORTS.database, "targetPort": PORTS.database,
                                "protocol": "TCP"}]}}


def database_ingress_policy(cluster: SlurmCluster) -> Obj:
    """Only slurmdbd reaches MariaDB. Login and worker pods may reach every pod of the namespace
    (Slurm's own traffic; sacct talks to slurmdbd, with munge); the database's port is not theirs:
    a user who learned the password must still not get to the records. Turned off with the egress
    policy, it allows all instead of disappearing (the operator never deletes)."""
    ingress = ([{"from": [{"podSelector": {"matchLabels": selector_labels(cluster, SLURMDBD)}}],
                 "ports": [{"protocol": "TCP", "port": PORTS.database}]}]
               if cluster.spec.network_policy.enabled else [{}])
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(cluster, object_name(cluster, NAMES.database_ingress), DATABASE),
            "spec": {"podSelector": {"matchLabels": selector_labels(cluster, DATABASE)},
                     "policyTypes": ["Ingress"], "ingress": ingress}}


def accounting_services(cluster: SlurmCluster) -> list[Obj]:
    """Everything of accounting but the Secrets and slurmdbd's StatefulSet; none when it is off."""
    if not cluster.spec.accounting.enabled:
        return []
    managed = [] if cluster.spec.accounting.external else [
        database_service(cluster), database_ingress_policy(cluster), database_stateful_set(cluster)]
    return managed + [slurmdbd_service(cluster)]


def accounting_objects(cluster: SlurmCluster, conf_secret: str) -> list[Obj]:
    """Everything but slurmdbd.conf's Secret (`conf_secret`: its name); none when accounting is off."""
    if not cluster.spec.accounting.enabled:
        return []
    return accounting_services(cluster) + [slurmdbd_stateful_set(cluster, conf_secret)]
