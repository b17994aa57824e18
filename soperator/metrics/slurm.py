"""Slurm's state as Prometheus metrics, read through slurmrestd when scraped: three calls per cluster
(nodes, jobs, diag; partitions are counted from the nodes), however many nodes and jobs there are.

Counted as sinfo and squeue count: nodes by node set and sinfo state (FUTURE records as
notRegistered, the node sets' placeholders left out), CPUs per partition as `sinfo -o %C`
(allocated, idle, other, total), GPUs per partition, jobs by partition and state, and sdiag's
scheduler figures. Every series carries the SlurmCluster's namespace and name. A cluster whose
Slurm cannot be read gives `slurm_up 0` and nothing else: never zeros that look like an empty cluster.
"""
from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from soperator.slurm import SlurmError, SlurmJob, SlurmNode, SlurmRestClient
from soperator.slurm.nodes import NODE_STATES

_GPU = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:(\d+)")
_LABELS = ["namespace", "cluster"]
# sdiag's figures: (metric, statistic, help, scale). Microseconds become seconds.
_SCHEDULER = (
    ("slurm_scheduler_cycle_last_seconds", "schedule_cycle_last", "last main scheduling cycle", 1e-6),
    ("slurm_scheduler_cycle_mean_seconds", "schedule_cycle_mean", "mean main scheduling cycle since reset", 1e-6),
    ("slurm_scheduler_cycle_max_seconds", "schedule_cycle_max", "longest main scheduling cycle since reset", 1e-6),
    ("slurm_scheduler_queue_length", "schedule_queue_length", "jobs pending in the main scheduler's queue", 1),
    ("slurm_backfill_cycle_last_seconds", "bf_cycle_last", "last backfill cycle", 1e-6),
    ("slurm_backfill_cycle_mean_seconds", "bf_cycle_mean", "mean backfill cycle since reset", 1e-6),
    ("slurm_backfill_queue_length", "bf_queue_len", "jobs pending for the backfill scheduler", 1),
    ("slurm_server_threads", "server_thread_count", "active slurmctld threads", 1),
    ("slurm_agent_queue_size", "agent_queue_size", "outgoing RPCs queued for retry", 1),
)
_JOB_EVENTS = ("submitted", "started", "completed", "canceled", "failed")


def gpus(gres: str) -> int:
    """GPUs in a node's gres string (gres or gres_used), e.g. gpu:h100:8(S:0-1),shard:8 -> 8."""
    return sum(int(count) for count in _GPU.findall(gres or ""))


@dataclass(frozen=True)
class Target:
    namespace: str
    cluster: str
    client: SlurmRestClient
    node_sets: tuple[str, ...]
    placeholders: frozenset[str]
    partitions: tuple[str, ...] = ()  # the spec's: each gets its series, at 0 while it has no node


def _node_set(node: SlurmNode, node_sets: tuple[str, ...]) -> str:
    """A worker registers with its node set's feature first (render/configs.worker_node_conf)."""
    return next((f for f in node.features if f in node_sets), "")


def families(t: Target, nodes: list[SlurmNode], jobs: list[SlurmJob], stats: dict) -> list[GaugeMetricFamily]:
    """The metric families of one cluster, from what Slurm said; pure."""
    who = [t.namespace, t.cluster]
    nodes = [n for n in nodes if n.name not in t.placeholders]
    by_state = Counter((_node_set(n, t.node_sets), n.category()) for n in nodes)
    node_family = GaugeMetricFamily("slurm_nodes", "Slurm nodes by node set and state, as sinfo counts them",
                                    labels=[*_LABELS, "node_set", "state"])
    for node_set in sorted({ns for ns, _ in by_state} | set(t.node_sets)):
        for state in NODE_STATES:
            node_family.add_metric([*who, node_set, state], by_state[(node_set, state)])

    cpus = GaugeMetricFamily("slurm_partition_cpus", "CPUs per partition, as sinfo -o %C (allocated, idle, "
                             "other: on drained or down nodes; total)", labels=[*_LABELS, "partition", "state"])
    gpu = GaugeMetricFamily("slurm_partition_gpus", "GPUs per partition (allocated, total)",
                            labels=[*_LABELS, "partition", "state"])
    per_partition = _partition_counts(nodes)
    for partition in t.partitions:
        per_partition.setdefault(partition, Counter())
    for partition, counts in sorted(per_partition.items()):
        for state in ("allocated", "idle", "other", "total"):
            cpus.add_metric([*who, partition, state], counts[f"cpus_{state}"])
        for state in ("allocated", "total"):
            gpu.add_metric([*who, partition, state], counts[f"gpus_{state}"])

    job_family = GaugeMetricFamily("slurm_jobs", "jobs slurmctld holds, by partition and state",
                                   labels=[*_LABELS, "partition", "state"])
    for (partition, state), count in sorted(Counter((j.partition, (j.job_state or ["UNKNOWN"])[0].lower())
                                                    for j in jobs).items()):
        job_family.add_metric([*who, partition, state], count)

    out = [_up(t, 1), node_family, cpus, gpu, job_family]
    for name, key, text, scale in _SCHEDULER:
        family = GaugeMetricFamily(name, text + " (sdiag)", labels=_LABELS)
        family.add_metric(who, _number(stats.get(key)) * scale)
        out.append(family)
    events = GaugeMetricFamily("slurm_scheduler_jobs", "jobs by event since sdiag's last reset (midnight)",
                               labels=[*_LABELS, "event"])
    for event in _JOB_EVENTS:
        events.add_metric([*who, event], _number(stats.get(f"jobs_{event}")))
    return [*out, events]


def _partition_counts(nodes: list[SlurmNode]) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for node in nodes:
        if node.category() == "notRegistered":
            continue  # sinfo leaves FUTURE records out
        unusable = "DRAIN" in node.flags or (node.state[:1] == ["DOWN"])
        for partition in node.partitions:
            c = out.setdefault(partition, Counter())
            c["cpus_total"] += node.cpus
            c["cpus_allocated"] += node.alloc_cpus
            c["cpus_other" if unusable else "cpus_idle"] += node.cpus - node.alloc_cpus
            c["gpus_total"] += gpus(node.gres)
            c["gpus_allocated"] += gpus(node.gres_used)
    return out


def _number(value: object) -> float:
    """v0.0.44 gives plain numbers, or {"set", "infinite", "number"} for some."""
    if isinstance(value, dict):
        return float(value.get("number") or 0) if value.get("set", True) else 0.0
    return float(value) if isinstance(value, (int, float)) else 0.0


def read(t: Target) -> list[GaugeMetricFamily]:
    try:
        return families(t, t.client.list_nodes(), t.client.list_jobs(), t.client.statistics())
    except SlurmError:
        return [_up(t, 0)]


def _up(t: Target, value: int) -> GaugeMetricFamily:
    family = GaugeMetricFamily("slurm_up", "1: Slurm answered this scrape", labels=_LABELS)
    family.add_metric([t.namespace, t.cluster], value)
    return family


class SlurmCollector(Collector):
    """The clusters the operator reconciles, each read when scraped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: dict[tuple[str, str], Target] = {}

    def track(self, target: Target) -> None:
        with self._lock:
            self._targets[(target.namespace, target.cluster)] = target

    def forget(self, namespace: str, cluster: str) -> None:
        with self._lock:
            self._targets.pop((namespace, cluster), None)

    def collect(self):
        with self._lock:
            targets = sorted(self._targets.values(), key=lambda t: (t.namespace, t.cluster))
        merged: dict[str, GaugeMetricFamily] = {}
        for target in targets:
            for family in read(target):
                if family.name in merged:
                    merged[family.name].samples.extend(family.samples)
                else:
                    merged[family.name] = family
        yield from merged.values()
