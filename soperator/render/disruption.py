"""PodDisruptionBudgets: what a voluntary eviction (a Kubernetes node drain, an autoscaler) may take.

The controller: nothing. slurmctld keeps every job's state; moving it is an admin's deliberate act
(delete the pod), never a side effect of draining a Kubernetes node. Login: one pod at a time, so a
node drain never takes every login node at once. Workers: none that may run a job. The budget covers
every worker pod but those the operator labels evictable, whose Slurm nodes are drained or down
(soperator/reconcile/evictions.py), and allows it no disruption: an eviction waits for Slurm, not for
pod readiness.
"""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.node.layout import CONTROLLER, EVICTABLE_LABEL, LOGIN, WORKER
from soperator.render.common import Obj, metadata, object_name, selector_labels


def disruption_budget(cluster: SlurmCluster, component: str, max_unavailable: int, **selector) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": metadata(cluster, object_name(cluster, component), component),
            "spec": {"maxUnavailable": max_unavailable,
                     "selector": {"matchLabels": selector_labels(cluster, component), **selector}}}


def disruption_budgets(cluster: SlurmCluster) -> list[Obj]:
    # NotIn also matches a pod without the label: a new pod is protected until Slurm says otherwise.
    not_evictable = [{"key": EVICTABLE_LABEL, "operator": "NotIn", "values": ["true"]}]
    return [disruption_budget(cluster, CONTROLLER, 0), disruption_budget(cluster, LOGIN, 1),
            disruption_budget(cluster, WORKER, 0, matchExpressions=not_evictable)]
