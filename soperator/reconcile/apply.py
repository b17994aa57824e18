"""Writing a rendered object: only when the live one does not already hold it."""
from __future__ import annotations

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ConflictError

from soperator.kube import Kube
from soperator.reconcile.diff import contains


def ensure(kube: Kube, obj: dict) -> bool:
    """Apply obj unless the live object already holds it; True if it wrote."""
    meta = obj["metadata"]
    live = kube.get(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
    if live is not None and contains(live, obj):
        return False
    kube.apply(obj)
    return True


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
