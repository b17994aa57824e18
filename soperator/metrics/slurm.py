"""Slurm's state as Prometheus metrics, read when scraped: slurmctld's own metrics (Slurm 25.11+:
its jobs, nodes, partitions and scheduler sets, as Slurm names them) and what only the operator knows.

Slurm's series are passed on as slurmctld gives them, with the SlurmCluster's namespace and name added
to every sample. The operator adds `slurm_up` and the nodes counted by node set and state
(`soperator_node_set_nodes`: node sets are soperator's; sinfo's states, FUTURE records as
notRegistered, the node sets' placeholders and autoscaling node sets' powered-down records left out), from the REST node list it keeps (a quiet
cluster's list costs no body). A scrape is that list and one GET per metric set, however many nodes
and jobs there are. A cluster whose Slurm cannot be read gives `slurm_up 0` and nothing else: never
zeros that look like an empty cluster.
"""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from prometheus_client import Metric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from soperator.slurm import SlurmError, SlurmNode, SlurmRestClient
from soperator.slurm.ctld_metrics import SlurmMetricsClient
from soperator.slurm.nodes import NODE_STATES

_LABELS = ["namespace", "cluster"]


@dataclass(frozen=True)
class Target:
    namespace: str
    cluster: str
    client: SlurmRestClient
    metrics: SlurmMetricsClient | None  # None: a slurmctld older than 25.11 serves none
    node_sets: tuple[str, ...]
    placeholders: frozenset[str]


def _node_set(node: SlurmNode, node_sets: tuple[str, ...]) -> str:
    """A worker registers with its node set's feature first (render/configs.worker_node_conf)."""
    return next((f for f in node.features if f in node_sets), "")


def node_set_family(t: Target, nodes: list[SlurmNode]) -> GaugeMetricFamily:
    """The nodes by node set and sinfo state; pure."""
    nodes = [n for n in nodes if n.name not in t.placeholders and n.power() != "POWERED_DOWN"]
    by_state = Counter((_node_set(n, t.node_sets), n.category()) for n in nodes)
    family = GaugeMetricFamily("soperator_node_set_nodes", "Slurm nodes by node set and state, as sinfo counts them",
                               labels=[*_LABELS, "node_set", "state"])
    for node_set in sorted({ns for ns, _ in by_state} | set(t.node_sets)):
        for state in NODE_STATES:
            family.add_metric([t.namespace, t.cluster, node_set, state], by_state[(node_set, state)])
    return family


def labelled(t: Target, family: Metric) -> Metric:
    """Slurm's family with the cluster's namespace and name on every sample; pure."""
    out = Metric(family.name, family.documentation, family.type, family.unit)
    out.samples = [s._replace(labels={"namespace": t.namespace, "cluster": t.cluster, **s.labels})
                   for s in family.samples]
    return out


def read(t: Target) -> list[Metric]:
    try:
        nodes = t.client.list_nodes()
        theirs = t.metrics.scrape_all() if t.metrics is not None else []
    except SlurmError:
        return [_up(t, 0)]
    return [_up(t, 1), node_set_family(t, nodes), *(labelled(t, f) for f in theirs)]


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
        merged: dict[str, Metric] = {}
        for target in targets:
            for family in read(target):
                if family.name in merged:
                    merged[family.name].samples.extend(family.samples)
                else:
                    merged[family.name] = family
        yield from merged.values()
