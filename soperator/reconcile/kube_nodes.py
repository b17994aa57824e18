"""Kubernetes node operations become Slurm's: pure, the worker pods, their Kubernetes nodes and Slurm's
nodes in, drains, resumes and downs out.

- A Kubernetes node cordoned (`kubectl cordon`, or the first step of `kubectl drain`) or not Ready:
  the Slurm nodes of the worker pods on it are drained, reason drains.KUBE_NODE then "<node>
  cordoned" (or "not ready"). Running jobs go on; none lands there. A node Kubernetes cannot reach may
  still run its jobs (only its kubelet may be cut off): Slurm's own SlurmdTimeout downs a node whose
  slurmd is silent, never a guess here.
- A Kubernetes node gone (its Node object deleted, its pods still listed on it): its Slurm nodes are
  set DOWN, since the machine is gone and its jobs with it, and each job ends as a node failure (or is
  requeued) at once rather than after SlurmdTimeout.
- Uncordoned and Ready again: only these drains are undone. A node someone else drained stays
  drained; one already drained is not drained again (its owner's reason stays).
- A record drained this way whose pod is gone (a released autoscaling record, a pod rescheduled
  elsewhere and not yet registered) is resumed: no cordoned node holds it any more.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from soperator.node.drains import KUBE_NODE, owned
from soperator.slurm import SlurmNode

# Slurm states in which a drain or a down would say nothing new.
_OUT = ("down", "notRegistered", "unknown")


@dataclass(frozen=True)
class NodeOps:
    drain: dict[str, str] = field(default_factory=dict)  # Slurm node: reason
    down: dict[str, str] = field(default_factory=dict)  # Slurm node: reason
    resume: list[str] = field(default_factory=list)


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def trouble(node: dict | None) -> str | None:
    """What is wrong with a Kubernetes node for the workers on it; None: nothing."""
    if node is None:
        return "gone"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    return None if _ready(node) else "not ready"


def plan_kube_nodes(pods: list[dict], kube_nodes: dict[str, dict] | None,
                    slurm: dict[str, SlurmNode] | None) -> NodeOps:
    """`pods`: the worker pods; `kube_nodes`: the Kubernetes nodes by name (None: not readable);
    `slurm`: Slurm's nodes by name (None: unknown). Either unknown: nothing is done."""
    if kube_nodes is None or slurm is None:
        return NodeOps()
    ops = NodeOps()
    placed = {}
    for pod in pods:
        name, host = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        if host:
            placed[name] = host
    for name, host in sorted(placed.items()):
        node = slurm.get(name)
        if node is None:
            continue
        problem = trouble(kube_nodes.get(host))
        reason = f"{KUBE_NODE} {host} {problem}"
        if problem is None:
            if owned(node.flags, node.reason, KUBE_NODE):
                ops.resume.append(name)
        elif problem == "gone":
            if node.category() not in _OUT:
                ops.down[name] = reason
        elif "DRAIN" not in node.flags and node.category() not in _OUT:
            ops.drain[name] = reason
    pods_named = {p["metadata"]["name"] for p in pods}
    ops.resume.extend(n.name for n in sorted(slurm.values(), key=lambda n: n.name)
                      if n.name not in pods_named and owned(n.flags, n.reason, KUBE_NODE))
    return ops
