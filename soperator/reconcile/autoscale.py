"""Elastic node sets: how many workers an autoscaling node set runs, planned from Slurm's power saving.

Slurm holds `max` CLOUD records of the node set (render/configs.py), powered down while no job needs
them. A job that needs nodes gets powered-down ones: Slurm marks them POWERING_UP and waits for their
slurmd. The node set's size is what it takes to run every node Slurm powered up, runs jobs on, or
that ran one within `idleSeconds`: the highest such ordinal plus one (a StatefulSet keeps its lowest
ordinals, and Slurm picks the lowest powered-down nodes first), never below `min`.

A node above that size is released by the drain-first scale-in (scale_in.py), so a job that lands on
it after all is waited for, and its drain undone once it is needed again. Once its pod is gone, the
operator powers its record down, which makes it a node a later job can resume. Slurm powers nothing
down by itself (SuspendTime never passes): it would pick any idle node, where the StatefulSet can
only give back its top ones. Slurm's state unknown: the size stays as it is.

A worker that does not start is given up: after the node set's `resumeTimeout`, counted from its pod's
creation, the operator sets its record DOWN with what holds the pod back, and Slurm requeues the jobs
that waited for it; Slurm does the same at its own ResumeTimeout (slurmConfig.resumeTimeout), without
the why. Either way the record is no longer needed: the StatefulSet lets its pod go, and once the pod
is gone the record is powered down, idle again, so a later try gets a fresh pod.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from soperator.api.spec import Autoscale
from soperator.node.drains import SCALE_IN, SLURM_RESUME_TIMEOUT, START_FAILED
from soperator.node.layout import ENV, member_name
from soperator.slurm import SlurmNode

# Categories (SlurmNode.category) of a node that holds jobs.
_BUSY = ("allocated", "mixed", "draining")


@dataclass(frozen=True)
class Sizing:
    replicas: int  # what the node set is driven to (scale_in.plan_scale_in's `desired`)
    reason: str  # why, for the status
    power_up: list[str] = field(default_factory=list)  # powered-down records whose pods start now
    power_down: list[str] = field(default_factory=list)  # released records, their pods gone
    waiting: list[str] = field(default_factory=list)  # powering up: their jobs wait for the pods
    idle: dict[str, int] = field(default_factory=dict)  # running workers with no job: since when (UNIX time)
    powered_down: int = 0  # records powered down: room to grow
    give_up: dict[str, str] = field(default_factory=dict)  # powering up past resumeTimeout: the DOWN reason


@dataclass(frozen=True)
class PodStart:
    created: float  # UNIX time
    problem: str  # what holds the pod back, as its status says; '' when it says nothing


def pod_start(pod: dict) -> PodStart:
    status = pod.get("status") or {}
    said = [c.get("message") or c.get("reason") or "" for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"]
    for container in status.get("initContainerStatuses", []) + status.get("containerStatuses", []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
            said.append(f"container {container.get('name')}: {waiting['reason']}")
    created = datetime.datetime.fromisoformat(pod["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return PodStart(created.timestamp(), "; ".join(s for s in said if s)[:300])


def _busy(node: SlurmNode) -> bool:
    return node.category() in _BUSY or "COMPLETING" in node.flags


def _powering_up(node: SlurmNode) -> bool:
    """Slurm powers it up for jobs, or the operator asked it to."""
    return node.power() in ("POWER_UP", "POWERING_UP")


def _failed_start(node: SlurmNode) -> bool:
    """Set DOWN because its worker did not start, by the operator or by Slurm."""
    return node.category() == "down" and (node.reason == SLURM_RESUME_TIMEOUT or node.reason.startswith(START_FAILED))


def _needed(node: SlurmNode | None, has_pod: bool, scale: Autoscale, now: float) -> bool:
    """Whether the node set must keep (or start) this node's pod."""
    if node is None or _failed_start(node):
        return False
    if _powering_up(node) or _busy(node):
        return True
    if node.power() or not has_pod:
        return False  # powered down or going there, or released and waiting to be
    return node.category() == "idle" and node.last_busy is not None and now - node.last_busy < scale.idle_seconds


def _power_down(node: SlurmNode | None) -> bool:
    """A released record that Slurm should count as powered down: not already, no job, and no drain
    but the scale-in's (powering down clears a drain, and an admin's must stay)."""
    if node is None or _busy(node):
        return False
    if _failed_start(node):
        return node.power() != "POWERING_DOWN"  # powering down makes it idle (idle_on_node_suspend)
    if node.power():
        return False
    return "DRAIN" not in node.flags or node.reason.startswith(SCALE_IN)


def _give_up(names: list[str], scale: Autoscale, nodes: dict[str, SlurmNode], starts: dict[str, PodStart],
             now: float) -> dict[str, str]:
    if scale.resume_timeout is None:
        return {}
    late = [n for n in names if n in starts and n in nodes and nodes[n].power() == "POWERING_UP"
            and nodes[n].category() != "down" and now - starts[n].created >= scale.resume_timeout]
    return {n: f"{START_FAILED} in {scale.resume_timeout}s: {starts[n].problem or 'its slurmd did not register'}"
            for n in late}


def powering_up(nodes: list[SlurmNode]) -> frozenset[str]:
    """The records Slurm powers up for jobs (or was asked to): each one waits for a worker pod."""
    return frozenset(n.name for n in nodes if _powering_up(n))


def plan_autoscale(prefix: str, scale: Autoscale, live: int | None, pods: dict[str, PodStart],
                   nodes: dict[str, SlurmNode] | None, now: float, hold: bool = False) -> Sizing:
    """`prefix`: the StatefulSet's name (its pods and Slurm records are `<prefix>-<ordinal>`); `live`:
    its replicas now (None: not created yet); `pods`: its pods that exist, by name; `nodes`: Slurm's
    nodes by name, None when unknown; `hold`: maintenance, which releases nothing."""
    current = scale.min if live is None else live
    if nodes is None:
        return Sizing(current, "Slurm's state is unknown: the size stays")
    names = [member_name(prefix, i) for i in range(scale.max)]
    needed = [i for i, name in enumerate(names) if _needed(nodes.get(name), name in pods, scale, now)]
    replicas = max(scale.min, needed[-1] + 1 if needed else 0)
    if hold:
        replicas = max(replicas, current)
    replicas = min(replicas, scale.max)
    waiting = [n for n in names if n in nodes and nodes[n].power() == "POWERING_UP"]
    idle = {n: nodes[n].last_busy for n in names[:replicas]
            if n in pods and n in nodes and nodes[n].category() == "idle" and not nodes[n].power()
            and nodes[n].last_busy is not None}
    power_up = [n for n in names[:replicas] if n in nodes and nodes[n].power() == "POWERED_DOWN"
                and nodes[n].category() == "idle"]
    power_down = [n for i, n in enumerate(names) if i >= max(replicas, current) and n not in pods
                  and _power_down(nodes.get(n))]
    down = sum(1 for n in names if n in nodes and nodes[n].power() == "POWERED_DOWN")
    give_up = _give_up(names, scale, nodes, pods, now)
    return Sizing(replicas, _reason(scale, replicas, waiting, needed, hold), power_up, power_down, waiting, idle, down,
                  give_up)


def _reason(scale: Autoscale, replicas: int, waiting: list[str], needed: list[int], hold: bool) -> str:
    if waiting:
        return f"jobs wait for {len(waiting)} node(s) powering up: {', '.join(waiting)}"
    if hold:
        return "maintenance: no worker released"
    if replicas == scale.min:
        return f"at min ({scale.min}): no job needs more workers"
    return f"{len(needed)} worker(s) running jobs, or idle for less than {scale.idle_seconds}s"


def mode_changes(node_sets: list, live: dict[str, dict]) -> list[str]:
    """Node sets switched between replicas and autoscale while their StatefulSet still has workers:
    their Slurm nodes are dynamic records in one mode and slurm.conf's CLOUD records in the other, and
    the two must not meet under one name. Each entry names the field and what to do."""
    refused = []
    for i, node_set in enumerate(node_sets):
        sts = live.get(node_set.name)
        if sts is None or not ((sts.get("spec") or {}).get("replicas") or (sts.get("status") or {}).get("replicas")):
            continue
        containers = sts["spec"]["template"]["spec"]["containers"]
        cloud = any(e.get("name") == ENV.cloud_node for c in containers for e in c.get("env") or [])
        if cloud != bool(node_set.autoscale):
            now, was = ("autoscale", "replicas") if node_set.autoscale else ("replicas", "autoscale")
            refused.append(f"spec.nodeSets[{i}].autoscale: node set {node_set.name} runs workers sized by {was}; "
                           f"to size it by {now}, bring it to zero workers first ({_to_zero(was)})")
    return refused


def _to_zero(mode: str) -> str:
    return "replicas: 0" if mode == "replicas" else "autoscale.min: 0, and wait for its workers' release"
