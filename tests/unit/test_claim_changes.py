"""Per-pod volumes a live StatefulSet keeps against those the spec asks for (reconcile/claims.py). The
live StatefulSets are the rendered ones, as the apiserver keeps them (sizes in canonical units)."""
from __future__ import annotations

import copy

from soperator.api import parse_cluster
from soperator.reconcile.claims import claim_changes
from soperator.reconcile.observe import Snapshot
from soperator.render.accounting import database_stateful_set
from soperator.render.controller import controller_stateful_set
from soperator.render.worker import worker_stateful_set

MANAGED = {"enabled": True, "managed": {"size": "10Gi"}}


def _cluster(**spec):
    return parse_cluster({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                          "metadata": {"name": "c", "namespace": "ns"}, "spec": spec})


def _live(cluster, canonical=None) -> Snapshot:
    objs = [controller_stateful_set(cluster), *(worker_stateful_set(cluster, n, 1) for n in cluster.spec.node_sets)]
    if cluster.spec.accounting.enabled:
        objs.append(database_stateful_set(cluster))
    objs = copy.deepcopy(objs)
    for obj in objs:
        for template in obj["spec"].get("volumeClaimTemplates") or []:
            size = template["spec"]["resources"]["requests"]["storage"]
            template["spec"]["resources"]["requests"]["storage"] = (canonical or {}).get(size, size)
    return Snapshot(cluster, {}, {("StatefulSet", o["metadata"]["name"]): o for o in objs})


def _refused(before: dict, after: dict, canonical=None) -> list[str]:
    snap = _live(_cluster(**before), canonical)
    snap.cluster = _cluster(**after)
    return claim_changes(snap)


def test_the_same_volumes_in_other_units_and_a_new_named_pvc_pass():
    spec = {"accounting": MANAGED, "nodeSets": [{"name": "a", "localVolume": {"mountPath": "/s", "size": "1024Mi"}}]}
    assert _refused(spec, spec, canonical={"1024Mi": "1Gi"}) == []
    named = {"controller": {"spool": {"claimName": "old"}}}
    assert _refused(named, {"controller": {"spool": {"claimName": "new", "size": "5Gi"}}}) == []


def test_each_changed_volume_is_named_by_its_field():
    before = {"accounting": MANAGED, "nodeSets": [{"name": "a"}, {"name": "b", "localVolume": {"mountPath": "/s",
                                                                                              "size": "1Gi"}}]}
    after = {"controller": {"spool": {"claimName": "spool"}},
             "accounting": {**MANAGED, "managed": {"size": "10Gi", "storageClassName": "fast"}},
             "nodeSets": [{"name": "a", "localVolume": {"mountPath": "/s", "size": "1Gi"}}, {"name": "b"}]}
    refused = _refused(before, after)
    assert [r.split(":")[0] for r in refused] == ["spec.controller.spool", "spec.accounting.managed",
                                                 "spec.nodeSets[0].localVolume", "spec.nodeSets[1].localVolume"]
    assert "StatefulSet c-controller keeps per-pod volume spool of 1Gi (the default storage class)" in refused[0]
    assert "asks for no per-pod volume" in refused[0]
    assert "asks for per-pod volume data of 10Gi (storage class fast)" in refused[1]
    assert "StatefulSet c-a keeps no per-pod volume" in refused[2]


def test_a_stateful_set_not_made_yet_or_accounting_switched_off_or_external_is_free_to_change():
    before = {"accounting": MANAGED}
    after = {"accounting": {"enabled": False, "managed": {"size": "20Gi"}},
             "nodeSets": [{"name": "new", "localVolume": {"mountPath": "/s", "size": "1Gi"}}]}
    assert _refused(before, after) == []
    # The managed database's StatefulSet is left to go once accounting moves to an external database.
    external = {"enabled": True, "managed": {"size": "20Gi"},
                "external": {"host": "db.example.com", "passwordSecret": "db"}}
    assert _refused(before, {"accounting": external}) == []
