"""Slurm-aware updates of a node set: a pure planner, observed state in, the next safe steps out.

Worker StatefulSets use OnDelete, so a new pod template (image, resources, volumes) replaces no pod by
itself. The operator replaces them: drain an outdated pod's node (reason UPDATE), wait until
it runs nothing, delete the pod (the StatefulSet makes it anew from the new template), and resume the
node if its old drain is still on the new registration. At most `maxUnavailable` nodes of the node set
are out of service for the rollout at a time: outdated ones drained for it, new ones not yet serving,
and ones deleted and not yet made again. An outdated pod whose node serves nothing (never registered,
down) is replaced at once. A node someone else drained keeps its pod and its drain: the rollout says
it waits for it. Slurm's state unknown: nothing moves.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from soperator.node.drains import UPDATE, DrainSteps, owned
from soperator.node.layout import REVISION_LABEL
from soperator.slurm import SlurmNode

_SERVING = ("idle", "allocated", "mixed")


@dataclass(frozen=True)
class Rollout(DrainSteps):
    delete_pods: list[str] = field(default_factory=list)
    outdated: list[str] = field(default_factory=list)
    waiting: str | None = None


def plan_rollout(update_revision: str | None, pods: list[dict], replicas: int, max_unavailable: int,
                 nodes: dict[str, SlurmNode] | None) -> Rollout:
    """`pods`: the node set's pods; `replicas`: the StatefulSet's count now (higher ordinals are the
    scale-in's business)."""
    if not update_revision:
        return Rollout()
    kept = {p["metadata"]["name"]: p for p in pods if _ordinal(p) < replicas}
    outdated = sorted(n for n, p in kept.items() if _revision(p) != update_revision)
    if nodes is None:
        return Rollout(outdated=outdated, waiting="Slurm's state is unknown: no pod replaced" if outdated else None)
    current = [n for n in kept if n not in outdated]
    resume = [n for n in current if _own_drain(nodes.get(n))]
    rolling = [n for n in outdated if _own_drain(nodes.get(n))]
    starting = [n for n in current if n not in resume and _state(nodes.get(n)) not in _SERVING]
    delete = [n for n in rolling if _state(nodes[n]) in ("drained", "down")]
    delete += [n for n in outdated if n not in rolling and _state(nodes.get(n)) in ("notRegistered", "down")]
    held = [n for n in outdated if n not in rolling and "DRAIN" in _flags(nodes.get(n))]
    # A pod deleted for the rollout and not yet made again serves nothing either (seen on the scale
    # rig: 54 of 500 out of service at maxUnavailable 50, before these were counted).
    absent = max(0, replicas - len(kept))
    budget = max_unavailable - len(rolling) - len(starting) - absent
    candidates = [n for n in reversed(outdated) if n not in rolling and n not in delete and n not in held
                  and _state(nodes.get(n)) in _SERVING]
    drain = candidates[:max(budget, 0)]
    if not outdated:
        return Rollout(resume=resume)
    busy = [n for n in rolling if n not in delete]
    parts = [f"{len(outdated)} pod(s) on the old template"]
    if busy:
        parts.append(f"draining: {', '.join(busy)}")
    if held:
        parts.append(f"drained by someone else, kept as they are: {', '.join(held)}")
    return Rollout(drain=drain, delete_pods=delete, resume=resume, outdated=outdated, waiting="; ".join(parts),
                   busy=busy)


def _ordinal(pod: dict) -> int:
    return int(pod["metadata"]["name"].rsplit("-", 1)[1])


def _revision(pod: dict) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(REVISION_LABEL)


def _state(node: SlurmNode | None) -> str:
    return node.category() if node else "notRegistered"


def _flags(node: SlurmNode | None) -> list[str]:
    return node.flags if node else []


def _own_drain(node: SlurmNode | None) -> bool:
    return node is not None and owned(node.flags, node.reason, UPDATE)
