"""The node-set plan from snapshots, no cluster: observed StatefulSets, pods and Slurm nodes in, every
step of the pass out. The real apiserver and Slurm prove the loop once per behaviour (tests/kube)."""
from __future__ import annotations

import pytest

from soperator.reconcile.conditions import Cond
from soperator.node.drains import MAINTENANCE, SCALE_IN, UPDATE
from soperator.node.layout import NODE_SET_LABEL
from soperator.reconcile.observe import Snapshot
from soperator.reconcile.plan import Removal, plan_node_sets
from soperator.reconcile.slurm_view import Observation
from soperator.render import node_objects
from soperator.slurm import SlurmNode
from tests.conftest import make_cluster
from tests.support.slurm_states import nodes_in_states

NEW, OLD = "rev-new", "rev-old"
NOW = 1_800_000_000.0


def _plan(snap: Snapshot):
    return plan_node_sets(snap, NOW)


def _sts(node_set: str, replicas: int, revision: str = NEW, pods: int | None = None) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": f"demo-{node_set}", "labels": {NODE_SET_LABEL: node_set}},
            "spec": {"replicas": replicas},
            "status": {"updateRevision": revision, "replicas": replicas if pods is None else pods}}


def _pods(node_set: str, *revisions: str) -> list[dict]:
    labels = {"app.kubernetes.io/component": "worker", NODE_SET_LABEL: node_set}
    return [{"metadata": {"name": f"demo-{node_set}-{i}", "labels": {**labels, "controller-revision-hash": r}}}
            for i, r in enumerate(revisions)]


def _nodes(node_set: str, *states: str) -> dict[str, SlurmNode]:
    return nodes_in_states(f"demo-{node_set}", *states)


def _snapshot(node_sets: list[dict], live: list[dict], pods: list[dict] = (), nodes: dict | None = None,
              **spec) -> Snapshot:
    cluster = make_cluster(nodeSets=node_sets, **spec)
    seen = Observation(nodes, Cond("SlurmReachable", nodes is not None, "Listed", ""))
    children = {("StatefulSet", s["metadata"]["name"]): s for s in live}
    return Snapshot(cluster, {}, children, list(pods), seen)


def test_a_new_node_set_gets_its_spec_count():
    plan = _plan(_snapshot([{"name": "a", "replicas": 3}], [], nodes={}))
    assert plan.replicas() == {"a": 3} and plan.removals == {}


@pytest.mark.parametrize("states, replicas, drain, busy", [
    (("IDLE", "IDLE", "IDLE"), 3, ["demo-a-1", "demo-a-2"], ["demo-a-1", "demo-a-2"]),
    (("IDLE", f"IDLE+DRAIN:{SCALE_IN}", f"IDLE+DRAIN:{SCALE_IN}"), 1, [], []),
    (("IDLE", f"IDLE+DRAIN:{SCALE_IN}", f"ALLOCATED+DRAIN:{SCALE_IN}"), 3, [], ["demo-a-2"]),
    (("IDLE", "", ""), 1, [], []),  # never registered: nothing to wait for
], ids=["drains-first", "drained-go", "a-busy-top-ordinal-holds-all", "unregistered-go"])
def test_scale_in_drains_then_lowers(states, replicas, drain, busy):
    plan = _plan(_snapshot([{"name": "a", "replicas": 1}], [_sts("a", 3)], _pods("a", NEW, NEW, NEW),
                                    _nodes("a", *states)))
    assert (plan.scale_in["a"].replicas, plan.scale_in["a"].drain, plan.scale_in["a"].busy) == (replicas, drain, busy)


def test_slurm_unknown_moves_nothing():
    plan = _plan(_snapshot([{"name": "a", "replicas": 1}], [_sts("a", 3, revision=NEW)],
                                    _pods("a", OLD, OLD, OLD), None))
    assert plan.replicas() == {"a": 3} and not plan.scale_in["a"].drain
    assert plan.rollouts["a"].delete_pods == [] and plan.rollouts["a"].drain == []
    assert "unknown" in plan.scale_in["a"].waiting and "unknown" in plan.rollouts["a"].waiting


@pytest.mark.parametrize("live, states, removal", [
    (_sts("old", 2), (f"IDLE+DRAIN:{SCALE_IN}", f"IDLE+DRAIN:{SCALE_IN}"), Removal("demo-old", replicas=0)),
    (_sts("old", 2), (f"IDLE+DRAIN:{SCALE_IN}", f"MIXED+DRAIN:{SCALE_IN}"), Removal("demo-old")),
    (_sts("old", 0, pods=1), (), Removal("demo-old")),  # its last pod still stopping
    (_sts("old", 0, pods=0), (), Removal("demo-old", delete=True)),
], ids=["lowered-once-drained", "waits-for-a-job", "waits-for-its-pods", "deleted-when-empty"])
def test_a_removed_node_set_goes_the_way_of_a_scale_in(live, states, removal):
    plan = _plan(_snapshot([{"name": "a", "replicas": 1}], [_sts("a", 1), live], nodes=_nodes("old", *states)))
    assert plan.removals == {"old": removal}
    assert set(plan.replicas()) == {"a", "old"}


def test_a_rollout_drains_within_max_unavailable_and_replaces_drained_pods():
    nodes = {**_nodes("a", "IDLE", f"IDLE+DRAIN:{UPDATE}", "ALLOCATED")}
    plan = _plan(_snapshot([{"name": "a", "replicas": 3, "maxUnavailable": 2}], [_sts("a", 3)],
                                    _pods("a", OLD, OLD, OLD), nodes))
    assert plan.rollouts["a"].delete_pods == ["demo-a-1"]
    assert plan.rollouts["a"].drain == ["demo-a-2"]  # one more within the budget of 2, highest ordinal first


def test_maintenance_holds_the_node_set_and_stops_the_rollouts_drains():
    plan = _plan(_snapshot([{"name": "a", "replicas": 2, "maintenance": True}], [_sts("a", 2)],
                                    _pods("a", OLD, OLD), _nodes("a", "IDLE", "ALLOCATED")))
    assert plan.holds["a"].drain == ["demo-a-0", "demo-a-1"]
    assert plan.rollouts["a"].drain == []
    off = _plan(_snapshot([{"name": "a", "replicas": 2}], [_sts("a", 2)], _pods("a", NEW, NEW),
                                   _nodes("a", f"IDLE+DRAIN:{MAINTENANCE}", "IDLE+DRAIN:admin")))
    assert off.holds["a"].resume == ["demo-a-0"]  # an admin's drain stays


def test_render_takes_the_planned_replicas_and_refuses_to_guess():
    snap = _snapshot([{"name": "a", "replicas": 1}], [_sts("a", 3)], _pods("a", NEW, NEW, NEW),
                     _nodes("a", "IDLE", "IDLE", "ALLOCATED"))
    plan = _plan(snap)
    workers = [o for o in node_objects(snap.cluster, plan.replicas()) if o["metadata"]["name"] == "demo-a"]
    assert workers[0]["spec"]["replicas"] == 3  # held up while demo-a-1 and demo-a-2 drain
    with pytest.raises(KeyError):
        node_objects(snap.cluster, {})
