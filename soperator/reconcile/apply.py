"""Writing a rendered object: only when the live one does not already hold it."""
from __future__ import annotations

import hashlib
import json

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ConflictError

from soperator.kube import Kube
from soperator.node.layout import APPLIED_DIGEST_ANNOTATION
from soperator.reconcile.diff import contains
from soperator.reconcile.observe import Snapshot


def _mutable(obj: dict) -> dict:
    """obj without a StatefulSet's claim templates, which the apiserver refuses to change (a spec that
    changes them is refused before any apply: reconcile/claims.py), so the digest never asks for it."""
    if obj.get("kind") != "StatefulSet" or "volumeClaimTemplates" not in obj.get("spec", {}):
        return obj
    return {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "volumeClaimTemplates"}}


def with_digest(obj: dict) -> dict:
    """obj carrying a digest of itself. Whether the live object holds obj is a subset test, blind to a
    field the operator stopped rendering (a resource limit, a node selector taken out of the spec: seen
    as a worker that kept /dev/fuse after its images were no longer mounted); the digest then differs,
    obj is applied, and server-side apply removes the fields this manager no longer names."""
    digest = hashlib.sha256(json.dumps(_mutable(obj), sort_keys=True).encode()).hexdigest()[:16]
    meta = obj["metadata"]
    return {**obj, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}),
                                                        APPLIED_DIGEST_ANNOTATION: digest}}}


def ensure(kube: Kube, snap: Snapshot, obj: dict) -> dict:
    """Apply obj unless the snapshot's live object already holds it; the object as it now stands."""
    obj = with_digest(obj)
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
