"""Accounting's objects: slurmdbd.conf's Secret (rendered from the password Secret), slurmdbd and,
unless external, the database; the AccountingReady condition. slurm.conf names slurmdbd only once
this condition is True (core.converge passes it to the ConfigMap's renderer)."""
from __future__ import annotations

import base64

from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.reconcile.apply import create_once, ensure
from soperator.reconcile.conditions import Cond
from soperator.render.accounting import DATABASE, accounting_objects, slurmdbd_conf_secret
from soperator.render.common import object_name
from soperator.render.configs import SLURMDBD
from soperator.render.secrets import DB_PASSWORD_FILE, db_password_secret_name


def ensure_accounting(kube: Kube, cluster: SlurmCluster) -> Cond | None:
    """None when accounting is off: no condition, nothing rendered (and nothing deleted)."""
    if not cluster.spec.accounting.enabled:
        return None
    name = db_password_secret_name(cluster)
    encoded = ((kube.get("v1", "Secret", cluster.namespace, name) or {}).get("data") or {}).get(DB_PASSWORD_FILE)
    if not encoded:
        return Cond("AccountingReady", False, "PasswordMissing", f"Secret {cluster.namespace}/{name} has no key "
                    f"{DB_PASSWORD_FILE}: slurmdbd is not started")
    try:
        conf = slurmdbd_conf_secret(cluster, base64.b64decode(encoded).decode().strip())
    except (ValueError, UnicodeDecodeError) as exc:
        return Cond("AccountingReady", False, "BadPassword", f"Secret {cluster.namespace}/{name}: {exc}")
    create_once(kube, conf)
    for obj in accounting_objects(cluster, conf["metadata"]["name"]):
        ensure(kube, obj)
    parts = [SLURMDBD] + ([] if cluster.spec.accounting.external else [DATABASE])
    waiting = [p for p in parts if not _ready(kube, cluster, p)]
    if waiting:
        return Cond("AccountingReady", False, "Starting", f"not ready yet: {', '.join(waiting)}")
    return Cond("AccountingReady", True, "Ready", f"{' and '.join(parts)} ready")


def _ready(kube: Kube, cluster: SlurmCluster, component: str) -> bool:
    sts = kube.get("apps/v1", "StatefulSet", cluster.namespace, object_name(cluster, component)) or {}
    return ((sts.get("status") or {}).get("readyReplicas") or 0) >= 1
