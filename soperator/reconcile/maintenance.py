"""Maintenance: a spec switch that drains a node set and holds it, deleting nothing. Running jobs
finish; no new one starts. Switched off, only the operator's own maintenance drains are undone; a
node an admin or a health check drained stays drained."""
from __future__ import annotations

from dataclasses import dataclass

from soperator.node.drains import MAINTENANCE, DrainSteps, owned
from soperator.node.layout import ordinal_of
from soperator.slurm import SlurmNode



@dataclass(frozen=True)
class Hold(DrainSteps):
    """busy: drained for maintenance, still running jobs."""


def plan_maintenance(prefix: str, on: bool, nodes: dict[str, SlurmNode] | None) -> Hold:
    """`prefix`: the node set's StatefulSet name; its Slurm nodes are `<prefix>-<ordinal>`."""
    if nodes is None:
        return Hold()
    own = [n for n in nodes.values() if ordinal_of(prefix, n.name) is not None]
    if not on:
        return Hold(resume=[n.name for n in own if _ours(n)])
    drain = [n.name for n in own if "DRAIN" not in n.flags and n.category() not in ("down", "notRegistered")]
    busy = [n.name for n in own if _ours(n) and n.category() == "draining"]
    return Hold(drain=drain, busy=busy)


def _ours(node: SlurmNode) -> bool:
    return owned(node.flags, node.reason, MAINTENANCE)
