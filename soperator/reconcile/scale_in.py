"""Scale-in that never kills a job: a pure planner, observed state in, the next safe steps out.

A StatefulSet removes its highest ordinals, so those are the nodes that go. The operator drains them
(no new job lands there), waits until they run nothing, and only then lowers the StatefulSet; the pod
that stops deletes its own Slurm record (soperator/node/roles.py). Lowering first and deleting the
record after avoids a race the other order has: a record deleted while slurmd still runs is
registered again by that slurmd, undrained, and could take a job before the pod stops.

Level-based: every decision comes from what is observed now (Slurm's nodes, the live replica count),
so an operator restarted mid-way resumes. Slurm's state unknown: nothing moves. Scaling back up
undoes only the operator's own drains (their reason starts with SCALE_IN).
"""
from __future__ import annotations

from dataclasses import dataclass

from soperator.node.drains import SCALE_IN, DrainSteps, owned
from soperator.node.layout import member_name
from soperator.slurm import SlurmNode

# States in which a leaving node runs nothing and can go.
_GONE_READY = ("drained", "down", "notRegistered")


@dataclass(frozen=True)
class ScaleIn(DrainSteps):
    replicas: int  # what the StatefulSet gets now
    waiting: str | None = None  # why the StatefulSet is not at the spec's count yet


def plan_scale_in(prefix: str, desired: int, live: int | None, nodes: dict[str, SlurmNode] | None) -> ScaleIn:
    """`prefix`: the StatefulSet's name (its pods are `<prefix>-<ordinal>`); `live`: its replicas now
    (None: not created yet); `nodes`: Slurm's nodes by name, None when unknown."""
    if live is None or desired >= live:
        return ScaleIn(desired, resume=_own_drains(prefix, range(desired), nodes))
    if nodes is None:
        return ScaleIn(live, waiting=f"scale-in {live} -> {desired} paused: Slurm's state is unknown, nothing removed")
    leaving = [member_name(prefix, i) for i in range(desired, live)]
    drain = [n for n in leaving if n in nodes and "DRAIN" not in nodes[n].flags
             and nodes[n].category() not in ("down", "notRegistered")]
    ready = {n for n in leaving if n not in drain and (n not in nodes or nodes[n].category() in _GONE_READY)}
    replicas = live
    while replicas > desired and member_name(prefix, replicas - 1) in ready:
        replicas -= 1
    busy = [n for n in leaving if n not in ready]
    waiting = None if replicas == desired else (
        f"scale-in {live} -> {desired}: waiting for {len(busy)} draining node(s) to finish their jobs: "
        f"{', '.join(busy)}")
    return ScaleIn(replicas, drain=drain, busy=busy, waiting=waiting)


def _own_drains(prefix: str, ordinals: range, nodes: dict[str, SlurmNode] | None) -> list[str]:
    if nodes is None:
        return []
    names = (member_name(prefix, i) for i in ordinals)
    return [n for n in names if n in nodes and owned(nodes[n].flags, nodes[n].reason, SCALE_IN)]
