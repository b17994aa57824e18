"""Slurm's view of the workers: observed once a pass, then turned into status.

- observe_slurm: the pass's one slurmrestd node list, whatever the number of nodes (an Observation:
  Slurm's nodes by name less the node sets' FUTURE placeholders, None when unknown, the
  SlurmReachable condition, and the jobs, listed at most once and only when a step waits for jobs).
- slurm_status: status.nodeSets (pods desired and ready, Slurm state counts per node set, what a
  scale-in waits for, an autoscaling node set's sizing) and status.slurmNodes (their sums); on the
  way, each worker pod's SlurmNode condition and evictable label (evictions.py), written only when
  they changed.
When Slurm cannot be asked, its state is unknown: the last counts and the pod conditions stay as
they were and the SlurmReachable condition says why."""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Callable

from soperator.api.cluster import SlurmCluster
from soperator.api.spec import NodeSetSpec
from soperator.kube import Kube
from soperator.node.layout import NODE_SET_LABEL
from soperator.reconcile.conditions import Cond
from soperator.reconcile.autoscale import Sizing
from soperator.reconcile.scale_in import ScaleIn
from soperator.render.configs import placeholder_node_name
from soperator.reconcile.drain_timeout import jobs_on
from soperator.reconcile.evictions import write_evictable_labels
from soperator.slurm import SlurmError, SlurmJob, SlurmNode, SlurmRestClient
from soperator.slurm.nodes import NODE_STATES, NodeState

POD_CONDITION = "SlurmNode"
_REASONS = {"idle": "Idle", "allocated": "Allocated", "mixed": "Mixed", "draining": "Draining",
            "drained": "Drained", "down": "Down", "notRegistered": "NotRegistered", "unknown": "Unknown"}
_IN_SERVICE = ("idle", "allocated", "mixed")

# Returns a client, or the reason there is none yet (the controller is not ready, no key).
# soperator.slurm.cluster_client.connect_in_cluster in the operator; tests point it elsewhere.
Connect = Callable[[Kube, SlurmCluster, bool], "SlurmRestClient | str"]


@dataclass(frozen=True)
class Observation:
    nodes: dict[str, SlurmNode] | None  # None: unknown
    condition: Cond
    client: SlurmRestClient | None = None
    _jobs: list[list[SlurmJob]] = field(default_factory=list, compare=False, repr=False)

    def all_jobs(self) -> list[SlurmJob] | None:
        """Every job slurmctld holds (the same one GET a pass), or None when it cannot be asked."""
        if self.client is None or self.nodes is None:
            return None
        try:
            return self._job_list()
        except SlurmError:
            return None

    def _job_list(self) -> list[SlurmJob]:
        if not self._jobs:
            self._jobs.append(self.client.list_jobs())
        return self._jobs[0]

    def jobs_on(self, names: list[str]) -> list[int]:
        """The jobs holding any of these nodes. One GET /jobs a pass at most, and none unless some
        operation waits for jobs (the list grows with the queue). Raises SlurmError."""
        if not names or self.client is None:
            return []
        return jobs_on(self._job_list(), names)


def observe_slurm(kube: Kube, cluster: SlurmCluster, controller_ready: bool, connect: Connect) -> Observation:
    client = connect(kube, cluster, controller_ready)
    if isinstance(client, str):
        return Observation(None, Cond("SlurmReachable", None, "NotConnected", client))
    try:
        nodes = client.list_nodes()
    except SlurmError as exc:
        return Observation(None, Cond("SlurmReachable", False, type(exc).__name__.removeprefix("Slurm") or "Error",
                                      str(exc)))
    workers = workers_of(cluster, nodes)
    return Observation(workers, Cond("SlurmReachable", True, "Listed", f"{len(workers)} Slurm nodes"), client)


def workers_of(cluster: SlurmCluster, nodes: list[SlurmNode]) -> dict[str, SlurmNode]:
    """Slurm's nodes by name, less the node sets' FUTURE placeholders (slurm.conf): those are no
    workers, never counted, never acted on."""
    placeholders = {placeholder_node_name(cluster, n) for n in cluster.spec.node_sets}
    return {n.name: n for n in nodes if n.name not in placeholders}


def slurm_status(kube: Kube, cluster: SlurmCluster, counts: dict[str, dict], body: dict, seen: Observation,
                 scale_ins: dict[str, ScaleIn], pods: list[dict], waited: dict | None = None,
                 sizing: dict[str, Sizing] | None = None) -> tuple[list[dict], dict | None]:
    """(status.nodeSets, status.slurmNodes); `counts`: each node set's desired and ready pods. The worker
    pods' conditions and evictable labels written on the way. Slurm
    unknown: the counts last seen stay. `waited`: per node set, the jobs its scale-in waits for;
    `sizing`: the autoscaling node sets' plans."""
    old = {s.get("name"): s.get("slurm") for s in (body.get("status") or {}).get("nodeSets") or []}
    if seen.nodes is not None:
        write_pod_conditions(kube, pods, seen.nodes)
        write_evictable_labels(kube, pods, seen.nodes)
    node_sets = []
    for node_set in cluster.spec.node_sets:
        entry = {"name": node_set.name, **counts[node_set.name]}
        slurm = slurm_state_counts(node_set, pods, seen.nodes) if seen.nodes is not None else old.get(node_set.name)
        plan = scale_ins[node_set.name]
        if plan.waiting:
            entry["scaleIn"] = {"replicas": node_set.replicas, "waitingFor": plan.busy, "message": plan.waiting}
            if node_set.name in (waited or {}):
                entry["scaleIn"]["jobs"] = len(waited[node_set.name].jobs)
        if node_set.name in (sizing or {}):
            entry["autoscale"] = autoscale_status(sizing[node_set.name])
        node_sets.append({**entry, **({"slurm": slurm} if slurm else {})})
    known = [n["slurm"] for n in node_sets if "slurm" in n]
    totals = {k: sum(n[k] for n in known) for k in known[0]} if seen.nodes is not None and known else None
    return node_sets, totals


def autoscale_status(sizing: Sizing) -> dict:
    return {"replicas": sizing.replicas, "message": sizing.reason, "poweringUp": sizing.waiting,
            "idleSince": {name: _time(since) for name, since in sizing.idle.items()}, "poweredDown": sizing.powered_down}


def category(name: str, nodes: dict[str, SlurmNode]) -> NodeState:
    node = nodes.get(name)
    return node.category() if node else "notRegistered"


def slurm_state_counts(node_set: NodeSetSpec, pods: list[dict], nodes: dict[str, SlurmNode]) -> dict[str, int]:
    """Each of the node set's workers once: its pods, and Slurm nodes of its NodeSet feature (an
    autoscaling node set's powered-down records are room to grow, not workers: status' autoscale)."""
    names = {p["metadata"]["name"] for p in pods if node_set_of(p) == node_set.name}
    names |= {n.name for n in nodes.values() if node_set.name in n.features and n.power() != "POWERED_DOWN"}
    counts = dict.fromkeys(NODE_STATES, 0)
    for name in names:
        counts[category(name, nodes)] += 1
    return counts  # the states are the status' keys already


# Slurm states in which a node has no registered slurmd whose record could be changed (placed, given
# features).
UNREGISTERED = ("notRegistered", "unknown")


def labels_of(obj: dict) -> dict[str, str]:
    """A Kubernetes object's labels ({} when it has none)."""
    return (obj.get("metadata") or {}).get("labels") or {}


def node_set_of(pod: dict) -> str | None:
    return labels_of(pod).get(NODE_SET_LABEL)


def pod_condition(name: str, nodes: dict[str, SlurmNode]) -> dict:
    state = category(name, nodes)
    node = nodes.get(name)
    if node is None:
        message = "no Slurm node of this name: slurmd has not registered"
    else:
        message = f"Slurm state {'+'.join(node.state) or 'none'}" + (f"; reason: {node.reason}" if node.reason else "")
    return {"type": POD_CONDITION, "status": "True" if state in _IN_SERVICE else "False",
            "reason": _REASONS[state], "message": message}


def pod_condition_changes(pods: list[dict], nodes: dict[str, SlurmNode], now: str) -> list[tuple[dict, dict]]:
    """(pod, its new condition) for each pod whose Slurm state is not what its condition says."""
    changes = []
    for pod in pods:
        want = pod_condition(pod["metadata"]["name"], nodes)
        have = next((c for c in (pod.get("status") or {}).get("conditions") or []
                     if c.get("type") == POD_CONDITION), None)
        if have and all(have.get(k) == v for k, v in want.items()):
            continue
        moved = have is None or have.get("status") != want["status"]
        changes.append((pod, {**want, "lastTransitionTime": now if moved else have.get("lastTransitionTime") or now}))
    return changes


def write_pod_conditions(kube: Kube, pods: list[dict], nodes: dict[str, SlurmNode]) -> int:
    """Returns how many were written; a pod deleted since the list is skipped (the next pass lists anew)."""
    changes = pod_condition_changes(pods, nodes, _now())
    return sum(kube.many(kube.patch_pod_condition, [(pod["metadata"]["namespace"], pod["metadata"]["name"], condition)
                                                    for pod, condition in changes]))


def _now() -> str:
    return _time(None)


def _time(seconds: float | None) -> str:
    """UTC, as Kubernetes writes times; None: now."""
    at = datetime.datetime.now(datetime.timezone.utc) if seconds is None else \
        datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")
