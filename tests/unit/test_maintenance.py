"""The maintenance planner as a table."""
from __future__ import annotations

from soperator.node.drains import MAINTENANCE
from soperator.reconcile.maintenance import plan_maintenance
from soperator.slurm import SlurmNode

P = "demo-cpu"


def _node(ordinal: int, state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(name=f"{P}-{ordinal}", state=state.split("+"), reason=reason)


def _nodes(*nodes: SlurmNode) -> dict[str, SlurmNode]:
    return {n.name: n for n in nodes}


def test_on_drains_every_serving_node_of_the_node_set_only():
    nodes = _nodes(_node(0, "IDLE"), _node(1, "ALLOCATED"), _node(2, "DOWN"), _node(3, "IDLE+DRAIN", "admin"),
                   SlurmNode(name="demo-gpu-0", state=["IDLE"]), SlurmNode(name="demo-cpu-x-0", state=["IDLE"]))
    hold = plan_maintenance(P, True, nodes)
    assert hold.drain == [f"{P}-0", f"{P}-1"] and hold.resume == []


def test_busy_nodes_are_reported_until_their_jobs_end():
    nodes = _nodes(_node(0, "ALLOCATED+DRAIN", MAINTENANCE + " of node set cpu"), _node(1, "IDLE+DRAIN",
                                                                                               MAINTENANCE))
    assert plan_maintenance(P, True, nodes).busy == [f"{P}-0"]


def test_off_undoes_only_its_own_drains_and_unknown_does_nothing():
    nodes = _nodes(_node(0, "IDLE+DRAIN", MAINTENANCE), _node(1, "IDLE+DRAIN", "admin: bad dimm"),
                   _node(2, "IDLE+DRAIN", "soperator: scale-in of node set cpu"))
    assert plan_maintenance(P, False, nodes).resume == [f"{P}-0"]
    assert plan_maintenance(P, True, None).drain == [] and plan_maintenance(P, False, None).resume == []
