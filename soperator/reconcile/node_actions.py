"""The operator's steps on Slurm nodes and worker pods, from the pure planners: scale-in
(scale_in.py), maintenance (maintenance.py) and rollouts (rollout.py). Each step is a drain or resume
through slurmrestd, or a pod deletion; each concern reports one condition. A failed call stops the
pass: the next one starts again from what it observes."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from soperator.api.cluster import SlurmCluster
from soperator.api.spec import NodeSetSpec
from soperator.kube import Kube
from soperator.reconcile.conditions import Cond
from soperator.reconcile.drain_timeout import overdue
from soperator.reconcile.maintenance import OWN_MAINTENANCE_DRAIN, plan_maintenance
from soperator.reconcile.rollout import OWN_UPDATE_DRAIN, Rollout, plan_rollout
from soperator.reconcile.scale_in import OWN_DRAIN, Plan, plan_replicas
from soperator.reconcile.slurm_nodes import Observation, node_set_of
from soperator.render.common import selector_labels
from soperator.render.nodes import NODE_SET_LABEL, WORKER
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
    return Cond(condition, False, "SlurmError", f"a drain, resume or cancel failed, retried next pass: {exc}")


@dataclass(frozen=True)
class Waited:
    """What a node set's scale-in or update waits for: the jobs on its drained nodes, and what its
    drainTimeout did about them this pass."""

    jobs: list[int]
    cancelled: list[int]
    timed_out: list[str]  # nodes past the deadline whose jobs keep running (action Warn)


def _wait_for_jobs(seen: Observation, node_set: NodeSetSpec | None, busy: list[str], own_reason: str,
                   now: float) -> Waited:
    jobs = seen.jobs_on(busy)
    late = overdue(busy, seen.nodes or {}, own_reason, node_set and node_set.drain_timeout, now)
    if not late:
        return Waited(jobs, [], [])
    if node_set.drain_timeout.action == "Warn":
        return Waited(jobs, [], late)
    cancel = seen.jobs_on(late)
    for job in cancel:
        seen.client.cancel_job(job)
    return Waited([j for j in jobs if j not in cancel], cancel, [])


def _waits(cluster: SlurmCluster, seen: Observation, steps: dict, own_reason: str,
           now: float | None) -> dict[str, Waited]:
    """Per node set whose plan waits on busy nodes (`steps[...].busy`): the jobs, and drainTimeout's doing."""
    if seen.nodes is None:
        return {}
    specs = {n.name: n for n in cluster.spec.node_sets}
    return {name: _wait_for_jobs(seen, specs.get(name), step.busy, own_reason, now or time.time())
            for name, step in steps.items() if step.busy}


def _report(condition: str, waited: dict[str, Waited], waiting: list[str], reason: str, done: Cond) -> Cond:
    """One condition for every node set's scale-in or update: what each waits for, and what its
    drainTimeout did (each its own reason, so each gets an event)."""
    if not waiting:
        return done
    cancelled = {n: w.cancelled for n, w in waited.items() if w.cancelled}
    late = {n: w.timed_out for n, w in waited.items() if w.timed_out}
    message = "; ".join(waiting)
    if cancelled:
        return Cond(condition, False, "DrainTimeoutCancelled", "drainTimeout reached, jobs cancelled: " + "; ".join(
            f"{n}: {', '.join(map(str, jobs))}" for n, jobs in cancelled.items()) + f"; {message}")
    if late:
        return Cond(condition, False, "DrainTimedOut", "drainTimeout reached, still waiting (action Warn) for: " +
                    "; ".join(f"{n}: {', '.join(nodes)}" for n, nodes in late.items()) + f"; {message}")
    return Cond(condition, False, reason, message)


def removed_node_sets(kube: Kube, cluster: SlurmCluster) -> dict[str, dict]:
    """The StatefulSets of node sets no longer in the spec, by node set name: each goes the way of a
    scale-in to zero (drained, waited for), then is deleted."""
    selector = ",".join(f"{k}={v}" for k, v in sorted(selector_labels(cluster, WORKER).items()))
    kept = {n.name for n in cluster.spec.node_sets}
    found = {((s["metadata"].get("labels") or {}).get(NODE_SET_LABEL), s["metadata"]["name"]): s
             for s in kube.list("apps/v1", "StatefulSet", cluster.namespace, selector)}
    return {node_set: sts for (node_set, _), sts in found.items() if node_set and node_set not in kept}


def scale_plans(kube: Kube, cluster: SlurmCluster, seen: Observation,
                removed: dict[str, dict]) -> dict[str, Plan]:
    """Each node set's replica count for now, and the drains that get it to its spec's; a removed
    node set's towards zero."""
    plans = {}
    for node_set in cluster.spec.node_sets:
        name = node_set_stateful_set_name(cluster, node_set)
        live = kube.get("apps/v1", "StatefulSet", cluster.namespace, name)
        plans[node_set.name] = plan_replicas(name, node_set.replicas,
                                             None if live is None else (live.get("spec") or {}).get("replicas", 0),
                                             seen.nodes)
    for node_set, sts in removed.items():
        plans[node_set] = plan_replicas(sts["metadata"]["name"], 0, (sts.get("spec") or {}).get("replicas", 0),
                                        seen.nodes)
    return plans


def remove_node_sets(kube: Kube, cluster: SlurmCluster, removed: dict[str, dict], plans: dict[str, Plan]) -> None:
    """Lower a removed node set's StatefulSet as its plan allows; delete it once it has no pod left."""
    for node_set, sts in removed.items():
        name, live = sts["metadata"]["name"], (sts.get("spec") or {}).get("replicas", 0)
        if plans[node_set].replicas < live:
            kube.patch("apps/v1", "StatefulSet", cluster.namespace, name, {"spec": {"replicas": plans[node_set].replicas}})
        elif live == 0 and not (sts.get("status") or {}).get("replicas"):
            kube.delete("apps/v1", "StatefulSet", cluster.namespace, name)


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


def act_on_plans(cluster: SlurmCluster, seen: Observation, plans: dict[str, Plan],
                 now: float | None = None) -> tuple[Cond, dict[str, Waited]]:
    """Drain the nodes that go, undo the operator's own drains of nodes that stay, apply drainTimeout;
    NodeSetsScaled, and per node set what its scale-in waits for."""
    waited: dict[str, Waited] = {}
    try:
        _drain_and_resume(seen, OWN_DRAIN, plans)
        waited = _waits(cluster, seen, plans, OWN_DRAIN, now)
    except SlurmError as exc:
        return _failed("NodeSetsScaled", exc), waited
    waiting = [f"{name}: {plan.waiting}" + _jobs_note(waited.get(name)) for name, plan in plans.items() if plan.waiting]
    return _report("NodeSetsScaled", waited, waiting, "Draining" if seen.nodes is not None else "Paused",
                   Cond("NodeSetsScaled", True, "AtSize", "every node set has its spec's replicas")), waited


def _jobs_note(waited: Waited | None) -> str:
    return f" ({len(waited.jobs)} job(s): {', '.join(map(str, waited.jobs))})" if waited and waited.jobs else ""


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


def act_on_rollouts(kube: Kube, cluster: SlurmCluster, seen: Observation, rollouts: dict[str, Rollout],
                    now: float | None = None) -> Cond:
    """Drain, replace and resume what the rollout planner says, apply drainTimeout; NodeSetsUpdated."""
    try:
        _drain_and_resume(seen, OWN_UPDATE_DRAIN, rollouts)
        waited = _waits(cluster, seen, rollouts, OWN_UPDATE_DRAIN, now)
    except SlurmError as exc:
        return _failed("NodeSetsUpdated", exc)
    for plan in rollouts.values():
        for pod in plan.delete_pods:
            kube.delete("v1", "Pod", cluster.namespace, pod)
    waiting = [f"{name}: {plan.waiting}" + _jobs_note(waited.get(name))
               for name, plan in rollouts.items() if plan.waiting]
    return _report("NodeSetsUpdated", waited, waiting, "Rolling" if seen.nodes is not None else "Paused",
                   Cond("NodeSetsUpdated", True, "Current", "every worker runs its node set's current template"))
