"""Accounting's objects: slurmdbd.conf's Secret (rendered from the password Secret), slurmdbd and,
unless external, the database; the AccountingReady condition. slurm.conf names slurmdbd only once
this condition is True (core.converge passes it to the ConfigMap's renderer)."""
from __future__ import annotations

import base64
import re

from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.node.layout import DATABASE, DB_PASSWORD_FILE, SLURMDBD
from soperator.reconcile.apply import create_once, ensure
from soperator.reconcile.conditions import Cond
from soperator.reconcile.observe import Snapshot
from soperator.render.accounting import accounting_objects, slurmdbd_conf_secret
from soperator.render.common import object_name
from soperator.render.configs import slurmdbd_host
from soperator.render.secrets import db_password_secret_name


def ensure_accounting(kube: Kube, snap: Snapshot, cluster: SlurmCluster | None = None) -> Cond | None:
    """None when accounting is off: no condition, nothing rendered (and nothing deleted). `cluster`: as
    slurmdbd is rendered, when an upgrade holds it on its release (default: the snapshot's)."""
    cluster = cluster or snap.cluster
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
        ensure(kube, snap, obj)
    parts = [SLURMDBD] + ([] if cluster.spec.accounting.external else [DATABASE])
    waiting = [p for p in parts if not _ready(snap.live("StatefulSet", object_name(cluster, p)))]
    if not waiting:
        return Cond("AccountingReady", True, "Ready", f"{' and '.join(parts)} ready")
    # While a managed database starts, slurmdbd's retries say so too: only the database is named then.
    if waiting == [SLURMDBD]:
        found = diagnose(kube.log_tail(cluster.namespace, slurmdbd_host(cluster), SLURMDBD))
        if found:
            return Cond("AccountingReady", False, *found)
    return Cond("AccountingReady", False, "Starting", f"not ready yet: {', '.join(waiting)}")


# slurmdbd retries its database every 5 s, logging "Connection failed to host ...", the client
# library's error and "The database must be up when starting the MYSQL plugin" each time (read in a
# real slurmdbd's log); it does not listen until it gets in.
_CONNECT_FAILED = re.compile(r"mysql_real_connect failed: (\d+) (.*)")
_RETRY_NOTES = ("Connection failed to host", "The database must be up")
# A fresh install's slurmdbd may fail a try or two while MariaDB makes its account: only a run of
# failures ending the log (10 s and more of them) is a diagnosis, not a start's race.
FAILED_TRIES = 3
_DENIED = {1044, 1045, 1698}  # access denied to the database / for the user
_UNREACHABLE = {2002, 2003, 2005, 2013}  # no socket, refused or timed out, unknown host, lost


def diagnose(log: str) -> tuple[str, str] | None:
    """(reason, message) when slurmdbd's log ends in repeated failures to reach its database."""
    failures = []
    for line in reversed([line for line in log.splitlines() if line.strip()]):
        match = _CONNECT_FAILED.search(line)
        if match:
            failures.append((int(match[1]), match[2].strip()))
        elif not any(note in line for note in _RETRY_NOTES):
            break
    if len(failures) < FAILED_TRIES:
        return None
    code, text = failures[0]
    if code in _DENIED:
        return "DatabaseAccessDenied", f"slurmdbd cannot log in to its database (is the password right?): {text}"
    if code in _UNREACHABLE:
        return "DatabaseUnreachable", f"slurmdbd cannot reach its database: {text}"
    return "DatabaseError", f"slurmdbd cannot use its database: {code} {text}"


def _ready(sts: dict | None) -> bool:
    return (((sts or {}).get("status") or {}).get("readyReplicas") or 0) >= 1
