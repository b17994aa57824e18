"""Which worker pods a voluntary eviction (`kubectl drain`, a cluster autoscaler) may take: those whose
Slurm node can run no job, drained (idle, its drain flag holding new jobs off) or down.

The workers' PodDisruptionBudget (render/disruption.py) allows no eviction of a worker pod without
EVICTABLE_LABEL, so `kubectl drain`, which retries a refused eviction, waits for the jobs: its cordon
is a Slurm drain (kube_nodes.py), and once the node's jobs end and Slurm says drained, the pass labels
the pod and the next eviction takes it. A pod Slurm has no record of stays protected: its slurmd may
register any moment and take a job. The labels follow Slurm at each pass, written only when they
change; while Slurm's state is unknown they stay, since no job starts without slurmctld.
"""
from __future__ import annotations

from soperator.kube import Kube
from soperator.node.layout import EVICTABLE_LABEL
from soperator.slurm import SlurmNode

EVICTABLE_STATES = ("drained", "down")


def evictable(name: str, nodes: dict[str, SlurmNode]) -> bool:
    node = nodes.get(name)
    return node is not None and node.category() in EVICTABLE_STATES


def label_changes(pods: list[dict], nodes: dict[str, SlurmNode]) -> list[tuple[dict, bool]]:
    """(pod, evictable now) for each worker pod whose label says otherwise."""
    changes = []
    for pod in pods:
        want = evictable(pod["metadata"]["name"], nodes)
        have = ((pod["metadata"].get("labels") or {}).get(EVICTABLE_LABEL) == "true")
        if want != have:
            changes.append((pod, want))
    return changes


def write_evictable_labels(kube: Kube, pods: list[dict], nodes: dict[str, SlurmNode]) -> int:
    """Returns how many pods were relabelled; a pod deleted since the list is skipped."""
    return sum(kube.many(kube.label_pod, [(pod["metadata"]["namespace"], pod["metadata"]["name"],
                                           {EVICTABLE_LABEL: "true" if want else None})
                                          for pod, want in label_changes(pods, nodes)]))
