"""Writing a rendered object: only when the live one does not already hold it."""
from __future__ import annotations

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
