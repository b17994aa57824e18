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
- A Kubernetes node condition the admin names (spec.healthCheck.kubernetesNodeConditions, e.g.
  node-problem-detector's KernelDeadlock) True on the node: drained as for a cordon, the reason
  "<node> <Type>: <its message>".
- Uncordoned, Ready and those conditions clear again: only these drains are undone. A node someone else drained stays
  drained; one already drained is not drained again (its owner's reason stays).
- A record drained this way whose pod is gone (a released autoscaling record, a pod rescheduled
  elsewhere and not yet registered) is resumed: no cordoned node holds it any more.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from soperator.node.drains import KUBE_NODE, owned
from soperator.node.layout import CORDONED_ANNOTATION
from soperator.reconcile.slurm_view import node_set_of
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


# A condition's message in a drain reason: Slurm's reasons are a line, and a short one reads in sinfo.
_MESSAGE_CHARS = 120


def bad_condition(node: dict | None, conditions: tuple[str, ...] | list[str]) -> str | None:
    """The first of these condition types True on the node, with its message; None: none is."""
    for cond in ((node or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") in conditions and cond.get("status") == "True":
            message = " ".join(str(cond.get("message") or cond.get("reason") or "").split())[:_MESSAGE_CHARS]
            return f"{cond['type']}: {message}" if message else cond["type"]
    return None


def trouble(node: dict | None, conditions: tuple[str, ...] | list[str] = ()) -> str | None:
    """What is wrong with a Kubernetes node for the workers on it; None: nothing. `conditions`: the
    condition types that count as trouble while True."""
    if node is None:
        return "gone"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    if not _ready(node):
        return "not ready"
    return bad_condition(node, conditions)


def plan_kube_nodes(pods: list[dict], kube_nodes: dict[str, dict] | None,
                    slurm: dict[str, SlurmNode] | None, conditions: tuple[str, ...] | list[str] = ()) -> NodeOps:
    """`pods`: the worker pods; `kube_nodes`: the Kubernetes nodes by name (None: not readable);
    `slurm`: Slurm's nodes by name (None: unknown). Either unknown: nothing is done. `conditions`:
    the node condition types that drain (trouble)."""
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
        problem = trouble(kube_nodes.get(host), conditions)
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


@dataclass(frozen=True)
class Replacements:
    """Workers moved off Kubernetes nodes a named condition marks bad (nodeSets[].replaceUnhealthy)."""

    cordon: dict[str, str] = field(default_factory=dict)  # Kubernetes node: the condition
    uncordon: list[str] = field(default_factory=list)  # the operator's own cordons, their condition gone
    delete: dict[str, str] = field(default_factory=dict)  # pod: its Kubernetes node
    waiting: dict[str, str] = field(default_factory=dict)  # pod: what its move waits for


def plan_replacements(replacing: set[str], pods: list[dict], kube_nodes: dict[str, dict] | None,
                      slurm: dict[str, SlurmNode] | None, conditions: tuple[str, ...] | list[str]) -> Replacements:
    """`replacing`: the node sets that ask for it. A worker on a node with a named condition True: the
    node is cordoned first (so the pod's next incarnation goes elsewhere), then, once Slurm says its
    node drained or down (its jobs done: kube_nodes' own drain took it out of service), the pod is
    deleted. Lifted: a cordon of the operator's (CORDONED_ANNOTATION) whose node is clear again.
    Either side unknown: nothing."""
    if kube_nodes is None or slurm is None:
        return Replacements()
    out = Replacements()
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name, host = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        if node_set_of(pod) not in replacing or not host or host not in kube_nodes:
            continue
        bad = bad_condition(kube_nodes[host], conditions)
        if bad is None or (pod["metadata"].get("deletionTimestamp")):
            continue
        if not (kube_nodes[host].get("spec") or {}).get("unschedulable"):
            out.cordon.setdefault(host, bad)
            out.waiting[name] = f"{host} to be cordoned"
        elif name in slurm and slurm[name].category() in ("drained", "down"):
            out.delete[name] = host
        else:
            out.waiting[name] = "its jobs to end" if name in slurm else "Slurm to know it"
    for host, node in sorted(kube_nodes.items()):
        ours = CORDONED_ANNOTATION in ((node.get("metadata") or {}).get("annotations") or {})
        if ours and (node.get("spec") or {}).get("unschedulable") and bad_condition(node, conditions) is None:
            out.uncordon.append(host)
    return out
