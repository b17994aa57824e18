"""The scale-in planner as a table: observed state in, the next safe steps out."""
from __future__ import annotations

from soperator.node.drains import SCALE_IN
from soperator.reconcile.scale_in import plan_scale_in
from soperator.slurm import SlurmNode

P = "demo-cpu"


def _nodes(**states) -> dict[str, SlurmNode]:
    out = {}
    for ordinal, state in states.items():
        name = f"{P}-{ordinal.removeprefix('n')}"
        base, _, reason = state.partition(":")
        out[name] = SlurmNode(name=name, state=base.split("+"), reason=reason)
    return out


def test_growing_or_creating_sets_the_spec_count():
    assert plan_scale_in(P, 3, None, None).replicas == 3
    assert plan_scale_in(P, 3, 2, None).replicas == 3


def test_busy_leaving_nodes_are_drained_and_waited_for():
    plan = plan_scale_in(P, 1, 3, _nodes(n0="IDLE", n1="ALLOCATED", n2="MIXED"))
    assert plan.replicas == 3 and plan.drain == [f"{P}-1", f"{P}-2"] and plan.busy == [f"{P}-1", f"{P}-2"]
    assert "waiting for 2 draining node(s)" in plan.waiting


def test_an_idle_node_is_drained_first_and_goes_on_the_next_pass():
    """Never lowered in the same pass it was drained: a job could have landed since the read."""
    plan = plan_scale_in(P, 1, 2, _nodes(n0="IDLE", n1="IDLE"))
    assert (plan.replicas, plan.drain) == (2, [f"{P}-1"])
    plan = plan_scale_in(P, 1, 2, _nodes(n0="IDLE", n1=f"IDLE+DRAIN:{SCALE_IN}"))
    assert (plan.replicas, plan.drain, plan.waiting) == (1, [], None)


def test_the_statefulset_shrinks_as_far_as_its_highest_ordinals_are_free():
    plan = plan_scale_in(P, 1, 4, _nodes(n1="ALLOCATED+DRAIN:x", n2="IDLE+DRAIN:x", n3="DOWN"))
    assert plan.replicas == 2 and plan.busy == [f"{P}-1"]


def test_nodes_with_no_record_or_never_registered_go_at_once():
    assert plan_scale_in(P, 0, 2, _nodes(n1="FUTURE")).replicas == 0


def test_unknown_slurm_state_moves_nothing():
    plan = plan_scale_in(P, 0, 3, None)
    assert plan.replicas == 3 and plan.drain == [] and "unknown" in plan.waiting
    # A node Slurm itself does not know the state of is waited for, never taken as drained.
    assert plan_scale_in(P, 0, 1, _nodes(n0="UNKNOWN+DRAIN:x")).replicas == 1


def test_scaling_back_up_undoes_only_the_operators_own_drains():
    nodes = _nodes(n0="IDLE+DRAIN:admin: bad dimm", n1=f"ALLOCATED+DRAIN:{SCALE_IN}", n2="IDLE")
    plan = plan_scale_in(P, 3, 3, nodes)
    assert plan.replicas == 3 and plan.resume == [f"{P}-1"]
