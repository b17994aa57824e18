"""PodDisruptionBudgets: what a voluntary eviction (a Kubernetes node drain, an autoscaler) may take.

The controller: nothing. slurmctld keeps every job's state; moving it is an admin's deliberate act
(delete the pod), never a side effect of draining a Kubernetes node. Login: one pod at a time, so a
node drain never takes every login node at once. Workers are drained through Slurm by the operator
(soperator/reconcile), not guarded here: a PDB cannot know whether a worker runs a job.
"""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.node.layout import CONTROLLER, LOGIN
from soperator.render.common import Obj, metadata, object_name, selector_labels


def disruption_budget(cluster: SlurmCluster, component: str, max_unavailable: int) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": metadata(cluster, object_name(cluster, component), component),
            "spec": {"maxUnavailable": max_unavailable,
                     "selector": {"matchLabels": selector_labels(cluster, component)}}}


def disruption_budgets(cluster: SlurmCluster) -> list[Obj]:
    return [disruption_budget(cluster, CONTROLLER, 0), disruption_budget(cluster, LOGIN, 1)]
