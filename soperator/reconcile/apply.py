"""Writing a rendered object: only when the live one does not already hold it."""
from __future__ import annotations

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ConflictError

from soperator.kube import Kube
from soperator.reconcile.diff import contains
from soperator.reconcile.observe import Snapshot


def ensure(kube: Kube, snap: Snapshot, obj: dict) -> dict:
    """Apply obj unless the snapshot's live object already holds it; the object as it now stands."""
    live = snap.live(obj["kind"], obj["metadata"]["name"])
    if live is not None and contains(live, obj):
        return live
    applied = kube.apply(obj)
    snap.wrote(applied)
    return applied


def create_once(kube: Kube, obj: dict) -> None:
    """Create obj unless it exists; one made meanwhile by another writer (an operator restarting, a
    second replica) is kept as it is."""
    meta = obj["metadata"]
    if kube.get(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"]) is not None:
        return
    try:
        kube.create(obj)
    except (ConflictError, ApiException) as exc:
        if getattr(exc, "status", None) != 409:
            raise
