"""The rollout planner as a table: pods and Slurm nodes in, the next safe steps out."""
from __future__ import annotations

from soperator.node.drains import UPDATE
from soperator.reconcile.rollout import plan_rollout
from soperator.slurm import SlurmNode
from tests.support.slurm_states import nodes_in_states

NEW, OLD = "rev-new", "rev-old"


def _pods(*revisions: str) -> list[dict]:
    return [{"metadata": {"name": f"c-cpu-{i}", "labels": {"controller-revision-hash": r}}}
            for i, r in enumerate(revisions)]


def _nodes(*states: str) -> dict[str, SlurmNode]:
    return nodes_in_states("c-cpu", *states)


def test_nothing_to_do_when_every_pod_is_current():
    assert plan_rollout(NEW, _pods(NEW, NEW), 2, 1, _nodes("IDLE", "ALLOCATED")).waiting is None


def test_one_node_at_a_time_is_drained_busy_ones_too():
    plan = plan_rollout(NEW, _pods(OLD, OLD, OLD), 3, 1, _nodes("IDLE", "ALLOCATED", "MIXED"))
    assert plan.drain == ["c-cpu-2"] and plan.delete_pods == []
    assert plan_rollout(NEW, _pods(OLD, OLD, OLD), 3, 2, _nodes("IDLE", "ALLOCATED", "MIXED")).drain == [
        "c-cpu-2", "c-cpu-1"]


def test_a_drained_node_that_runs_nothing_loses_its_pod_a_busy_one_waits():
    busy = plan_rollout(NEW, _pods(OLD, OLD), 2, 1, _nodes("IDLE", f"ALLOCATED+DRAIN:{UPDATE}"))
    assert busy.delete_pods == [] and busy.drain == [] and "draining: c-cpu-1" in busy.waiting
    free = plan_rollout(NEW, _pods(OLD, OLD), 2, 1, _nodes("IDLE", f"IDLE+DRAIN:{UPDATE}"))
    assert free.delete_pods == ["c-cpu-1"] and free.drain == []


def test_a_new_pod_not_yet_serving_holds_the_next_and_its_old_drain_is_undone():
    starting = plan_rollout(NEW, _pods(OLD, NEW), 2, 1, _nodes("IDLE", ""))
    assert starting.drain == [] and starting.outdated == ["c-cpu-0"]
    registered = plan_rollout(NEW, _pods(OLD, NEW), 2, 1, _nodes("IDLE", f"IDLE+DRAIN:{UPDATE}"))
    assert registered.resume == ["c-cpu-1"]


def test_a_pod_deleted_and_not_yet_made_again_counts_as_out_of_service():
    pods = [p for p in _pods(OLD, NEW, OLD, OLD) if p["metadata"]["name"] != "c-cpu-1"]
    assert plan_rollout(NEW, pods, 4, 1, _nodes("IDLE", "", "IDLE", "IDLE")).drain == []
    assert plan_rollout(NEW, pods, 4, 2, _nodes("IDLE", "", "IDLE", "IDLE")).drain == ["c-cpu-3"]


def test_pods_serving_nothing_are_replaced_at_once_and_others_drains_are_kept():
    plan = plan_rollout(NEW, _pods(OLD, OLD, OLD), 3, 1, _nodes("", "DOWN", "IDLE+DRAIN:admin: bad dimm"))
    assert sorted(plan.delete_pods) == ["c-cpu-0", "c-cpu-1"] and plan.drain == [] and plan.resume == []
    assert "kept as they are: c-cpu-2" in plan.waiting


def test_unknown_slurm_state_replaces_nothing_and_leaving_ordinals_are_not_rolled():
    plan = plan_rollout(NEW, _pods(OLD, OLD), 2, 1, None)
    assert plan.delete_pods == plan.drain == [] and "unknown" in plan.waiting
    assert plan_rollout(NEW, _pods(NEW, OLD), 1, 1, _nodes("IDLE", "IDLE")).waiting is None
