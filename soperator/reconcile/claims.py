"""Per-pod volumes of a live StatefulSet, which its spec can no longer change.

Kubernetes fixes a StatefulSet's volumeClaimTemplates at its creation and refuses any update that
changes them, so a spec that changes the size or storage class of the controller's spool, the managed
database's data or a node set's local volume (or swaps one for a named PVC) would fail every apply of
that StatefulSet while the rest of the cluster moved on. The pass is refused instead, before any
write, with each field named and what its StatefulSet keeps.
"""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.api.fields import quantity_value
from soperator.node.layout import CONTROLLER, DATABASE
from soperator.reconcile.observe import Snapshot
from soperator.render.common import Obj, object_name
from soperator.render.accounting import database_volume
from soperator.render.controller import spool_volume
from soperator.render.worker import local_volume, node_set_stateful_set_name


def _claims(templates: list[Obj]) -> dict[str, tuple[str, str | None]]:
    """name → (size as written, storage class)."""
    return {t["metadata"]["name"]: (str(t["spec"]["resources"]["requests"]["storage"]), t["spec"].get("storageClassName"))
            for t in templates}


def _same(kept: dict[str, tuple[str, str | None]], asked: dict[str, tuple[str, str | None]]) -> bool:
    """By value: the apiserver may write a size in another unit (1Gi as 1024Mi)."""
    def value(claims):
        return {name: (quantity_value(size), cls) for name, (size, cls) in claims.items()}
    return value(kept) == value(asked)


def _describe(claims: dict[str, tuple[str, str | None]]) -> str:
    if not claims:
        return "no per-pod volume"
    return ", ".join(f"per-pod volume {name} of {size} ({f'storage class {cls}' if cls else 'the default storage class'})"
                     for name, (size, cls) in sorted(claims.items()))


def _wanted(cluster: SlurmCluster) -> list[tuple[str, str, list[Obj]]]:
    """(field, StatefulSet, claim templates the spec asks for) of each StatefulSet that may have some."""
    spec = cluster.spec
    out = [("spec.controller.spool", object_name(cluster, CONTROLLER), spool_volume(cluster)[1])]
    if spec.accounting.enabled and not spec.accounting.external:
        out.append(("spec.accounting.managed", object_name(cluster, DATABASE), database_volume(cluster)[1]))
    out += [(f"spec.nodeSets[{i}].localVolume", node_set_stateful_set_name(cluster, n), local_volume(n)[1])
            for i, n in enumerate(spec.node_sets)]
    return out


def claim_changes(snap: Snapshot) -> list[str]:
    """One message per field whose live StatefulSet was made with other per-pod volumes."""
    refused = []
    for field, name, templates in _wanted(snap.cluster):
        live = snap.live("StatefulSet", name)
        if live is None:
            continue
        kept, asked = _claims(live["spec"].get("volumeClaimTemplates") or []), _claims(templates)
        if not _same(kept, asked):
            refused.append(f"{field}: StatefulSet {name} keeps {_describe(kept)} and Kubernetes does not change a "
                           f"StatefulSet's volumeClaimTemplates: put the field back (this spec asks for "
                           f"{_describe(asked)}), though a PVC grows in place where its storage class allows expansion "
                           f"(docs/node-sets.md, per-pod volumes)")
    return refused
