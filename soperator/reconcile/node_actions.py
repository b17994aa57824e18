"""The operator's steps on Slurm nodes and worker pods, from the pure planners: scale-in
(scale_in.py), maintenance (maintenance.py) and rollouts (rollout.py). Each step is a drain or resume
through slurmrestd, or a pod deletion; each concern reports one condition. A failed call stops the
pass: the next one starts again from what it observes."""
from __future__ import annotations

from dataclasses import replace

from soperator.api.cluster import SlurmCluster
from soperator.api.spec import NodeSetSpec
from soperator.kube import Kube
from soperator.reconcile.conditions import Cond
from soperator.reconcile.maintenance import OWN_MAINTENANCE_DRAIN, plan_maintenance
from soperator.reconcile.rollout import OWN_UPDATE_DRAIN, Rollout, plan_rollout
from soperator.reconcile.scale_in import OWN_DRAIN, Plan, plan_replicas
from soperator.reconcile.slurm_nodes import Observation, node_set_of
from soperator.render.worker import node_set_stateful_set_name
from soperator.slurm import SlurmError


def _drain_and_resume(seen: Observation, reason: str, steps: dict) -> None:
    """`steps`: per node set, a plan with `drain` and `resume` lists of node names."""
    for node_set, step in steps.items():
        for node in step.drain:
            seen.client.drain(node, f"{reason} of node set {node_set}")
        for node in step.resume:
            seen.client.resume(node)


def _failed(condition: str, exc: SlurmError) -> Cond:
    return Cond(condition, False, "SlurmError", f"a drain or resume failed, retried next pass: {exc}")


def scale_plans(kube: Kube, cluster: SlurmCluster, seen: Observation) -> dict[str, Plan]:
    """Each node set's replica count for now, and the drains that get it to its spec's."""
    plans = {}
    for node_set in cluster.spec.node_sets:
        name = node_set_stateful_set_name(cluster, node_set)
        live = kube.get("apps/v1", "StatefulSet", cluster.namespace, name)
        plans[node_set.name] = plan_replicas(name, node_set.replicas,
                                             None if live is None else (live.get("spec") or {}).get("replicas", 0),
                                             seen.nodes)
    return plans


def act_on_maintenance(cluster: SlurmCluster, seen: Observation) -> Cond:
    """Drain and hold the node sets in maintenance, undo the operator's own maintenance drains of the
    others; Maintenance."""
    holds = {n.name: plan_maintenance(node_set_stateful_set_name(cluster, n), in_maintenance(cluster, n), seen.nodes)
             for n in cluster.spec.node_sets}
    try:
        _drain_and_resume(seen, OWN_MAINTENANCE_DRAIN, holds)
    except SlurmError as exc:
        return _failed("Maintenance", exc)
    on = [n.name for n in cluster.spec.node_sets if in_maintenance(cluster, n)]
    if not on:
        return Cond("Maintenance", False, "Off", "no node set in maintenance")
    if seen.nodes is None:
        return Cond("Maintenance", None, "Paused", f"in maintenance: {', '.join(on)}; Slurm's state is unknown")
    busy = [b for h in holds.values() for b in h.busy]
    detail = f"; still running jobs: {', '.join(busy)}" if busy else "; every node drained"
    return Cond("Maintenance", True, "Holding" if busy else "Held", f"in maintenance: {', '.join(on)}{detail}")


def act_on_plans(cluster: SlurmCluster, seen: Observation, plans: dict[str, Plan]) -> Cond:
    """Drain the nodes that go, undo the operator's own drains of nodes that stay; NodeSetsScaled."""
    try:
        _drain_and_resume(seen, OWN_DRAIN, plans)
    except SlurmError as exc:
        return _failed("NodeSetsScaled", exc)
    waiting = [f"{name}: {plan.waiting}" for name, plan in plans.items() if plan.waiting]
    if waiting:
        return Cond("NodeSetsScaled", False, "Draining" if seen.nodes is not None else "Paused", "; ".join(waiting))
    return Cond("NodeSetsScaled", True, "AtSize", "every node set has its spec's replicas")


def in_maintenance(cluster: SlurmCluster, node_set: NodeSetSpec) -> bool:
    return node_set.maintenance or cluster.spec.maintenance


def rollout_plans(cluster: SlurmCluster, seen: Observation, plans: dict[str, Plan], pods: list[dict],
                  live: dict[str, dict | None]) -> dict[str, Rollout]:
    """`live`: the node sets' StatefulSets by node set name, as the apiserver holds them."""
    out = {}
    for node_set in cluster.spec.node_sets:
        revision = ((live.get(node_set.name) or {}).get("status") or {}).get("updateRevision")
        own = [p for p in pods if node_set_of(p) == node_set.name]
        plan = plan_rollout(revision, own, plans[node_set.name].replicas, node_set.max_unavailable, seen.nodes)
        # Maintenance holds the node set: no drain of the rollout's own until it is over.
        out[node_set.name] = replace(plan, drain=[]) if in_maintenance(cluster, node_set) else plan
    return out


def act_on_rollouts(kube: Kube, cluster: SlurmCluster, seen: Observation, rollouts: dict[str, Rollout]) -> Cond:
    """Drain, replace and resume what the rollout planner says; NodeSetsUpdated."""
    try:
        _drain_and_resume(seen, OWN_UPDATE_DRAIN, rollouts)
    except SlurmError as exc:
        return _failed("NodeSetsUpdated", exc)
    for plan in rollouts.values():
        for pod in plan.delete_pods:
            kube.delete("v1", "Pod", cluster.namespace, pod)
    waiting = [f"{name}: {plan.waiting}" for name, plan in rollouts.items() if plan.waiting]
    if waiting:
        return Cond("NodeSetsUpdated", False, "Rolling" if seen.nodes is not None else "Paused", "; ".join(waiting))
    return Cond("NodeSetsUpdated", True, "Current", "every worker runs its node set's current template")
