"""The act step of a pass: what plan.py (and checks.py) planned, done through slurmrestd and the
Kubernetes API. One function per concern, each reporting its one condition:
- act_on_scale_in: scale-in drains and resumes, drainTimeout's warnings and cancels (NodeSetsScaled);
- act_on_maintenance: maintenance drains and their undoing (Maintenance);
- act_on_sizing: autoscaling's power ups, power downs and given-up records set DOWN (Autoscaled);
- act_on_kube_nodes: drains, downs and resumes for Kubernetes node operations (KubernetesNodes);
- act_on_replacements: cordons, uncordons and pod deletions that move workers off bad Kubernetes
  nodes, with events (WorkersReplaced);
- act_on_topology: the place annotation on bound pods, each moved node's place in Slurm (Topology);
- act_on_checks: active checks' job submissions and cancels, drains or comments (HealthChecks);
- act_on_rollouts: rollout drains, pod deletions and resumes, drainTimeout (NodeSetsUpdated);
- remove_node_sets: a removed node set's StatefulSet lowered, then deleted.
A failed Slurm call ends that concern's steps for the pass with its condition saying so: the next
pass starts again from what it observes."""
from __future__ import annotations

import time
from functools import partial
from typing import Callable

from soperator.api.cluster import SlurmCluster
from soperator.api.topology import TopologySpec
from soperator.kube import Kube
from soperator.node.layout import CORDONED_ANNOTATION, PLACE_ANNOTATION
from soperator.reconcile.checks import CheckPlan
from soperator.reconcile.conditions import Cond
from soperator.node.drains import KUBE_NODE, MAINTENANCE, SCALE_IN, START_FAILED, UPDATE, DrainSteps
from soperator.reconcile.drain_timeout import Waited, plan_wait
from soperator.reconcile.autoscale import Sizing
from soperator.reconcile.kube_nodes import NodeOps, Replacements
from soperator.reconcile.maintenance import Hold
from soperator.reconcile.plan import NodeSetPlan, in_maintenance
from soperator.reconcile.rollout import Rollout
from soperator.reconcile.scale_in import ScaleIn
from soperator.reconcile.topology import Placement, topology_condition
from soperator.reconcile.slurm_view import Observation
from soperator.slurm import SlurmError


def _drain_and_resume(seen: Observation, reason: str, steps: dict[str, DrainSteps]) -> None:
    """`steps`: per node set, what its planner asks; `reason`: the planner's own (node/drains.py)."""
    for node_set, step in steps.items():
        for node in step.drain:
            seen.client.drain(node, f"{reason} of node set {node_set}")
        for node in step.resume:
            seen.client.resume(node)


def _failed(condition: str, exc: SlurmError) -> Cond:
    return Cond(condition, False, "SlurmError", f"a drain, resume or cancel failed, retried next pass: {exc}")


def _waits(cluster: SlurmCluster, seen: Observation, steps: dict[str, DrainSteps], own_reason: str,
           now: float | None) -> dict[str, Waited]:
    """Per node set whose plan waits on busy nodes: the jobs, and drainTimeout's doing, done (the cancels)."""
    if seen.nodes is None:
        return {}
    timeouts = {n.name: n.drain_timeout for n in cluster.spec.node_sets}
    waited = {name: plan_wait(step.busy, seen.nodes, own_reason, timeouts.get(name), seen.jobs_on, now or time.time())
              for name, step in steps.items() if step.busy}
    for wait in waited.values():
        for job in wait.cancel:
            seen.client.cancel_job(job)
    return waited


def _report(condition: str, waited: dict[str, Waited], waiting: list[str], reason: str, done: Cond) -> Cond:
    """One condition for every node set's scale-in or update: what each waits for, and what its
    drainTimeout did (each its own reason, so each gets an event)."""
    if not waiting:
        return done
    cancelled = {n: w.cancel for n, w in waited.items() if w.cancel}
    late = {n: w.timed_out for n, w in waited.items() if w.timed_out}
    message = "; ".join(waiting)
    if cancelled:
        return Cond(condition, False, "DrainTimeoutCancelled", "drainTimeout reached, jobs cancelled: " + "; ".join(
            f"{n}: {', '.join(map(str, jobs))}" for n, jobs in cancelled.items()) + f"; {message}")
    if late:
        return Cond(condition, False, "DrainTimedOut", "drainTimeout reached, still waiting (action Warn) for: " +
                    "; ".join(f"{n}: {', '.join(nodes)}" for n, nodes in late.items()) + f"; {message}")
    return Cond(condition, False, reason, message)


def _each(condition: str, what: str, calls: list[Callable[[], None]]) -> Cond | None:
    """Make the Slurm calls in order; the first failure stops them and is the condition's."""
    try:
        for call in calls:
            call()
    except SlurmError as exc:
        return Cond(condition, False, "SlurmError", f"{what} failed, retried next pass: {exc}")
    return None


def act_on_sizing(seen: Observation, sizing: dict[str, Sizing]) -> Cond | None:
    """Power up the records of the pods an autoscaling node set starts, power down those of the pods it
    released; Autoscaled (None: no node set autoscales)."""
    if not sizing:
        return None
    failed = _each("Autoscaled", "a power up or down", [partial(seen.client.power_up, n) for p in sizing.values()
                                                          for n in p.power_up] +
                   [partial(seen.client.power_down, n) for p in sizing.values() for n in p.power_down] +
                   [partial(seen.client.down, n, r) for p in sizing.values() for n, r in p.give_up.items()])
    if failed:
        return failed
    if seen.nodes is None:
        return Cond("Autoscaled", None, "Paused", "Slurm's state is unknown: every autoscaling node set keeps its size")
    waiting = [n for plan in sizing.values() for n in plan.waiting]
    message = "; ".join(f"{name}: {plan.replicas} ({plan.reason})" for name, plan in sizing.items())
    given_up = {n: r for plan in sizing.values() for n, r in plan.give_up.items()}
    if given_up:
        return Cond("Autoscaled", False, "StartFailed", "; ".join(
            f"{n} set down, its jobs requeued: {r.removeprefix(START_FAILED + ' ')}" for n, r in given_up.items())
            + f"; {message}")
    return Cond("Autoscaled", True, "Growing" if waiting else "Sized", message)


def act_on_kube_nodes(seen: Observation, ops: NodeOps, unread: str) -> Cond:
    """Drain, down and resume the Slurm nodes of workers on cordoned, not ready or gone Kubernetes
    nodes; KubernetesNodes. `unread`: why the Kubernetes nodes could not be read."""
    if unread:
        return Cond("KubernetesNodes", None, "Unreadable", f"cordons and node failures are not followed: {unread}")
    failed = _each("KubernetesNodes", "a drain, down or resume",
                   [partial(seen.client.drain, n, r) for n, r in ops.drain.items()] +
                   [partial(seen.client.down, n, r) for n, r in ops.down.items()] +
                   [partial(seen.client.resume, n) for n in ops.resume])
    if failed:
        return failed
    if seen.nodes is None:
        return Cond("KubernetesNodes", None, "Paused", "Slurm's state is unknown")
    held = {**{n.name: n.reason for n in seen.nodes.values() if n.reason.startswith(KUBE_NODE)
               and n.name not in ops.resume}, **ops.drain, **ops.down}
    if not held:
        return Cond("KubernetesNodes", True, "Followed", "no worker is on a cordoned, not ready, unhealthy or gone Kubernetes node")
    return Cond("KubernetesNodes", True, "Followed", "held in Slurm for their Kubernetes nodes: " + "; ".join(
        f"{n} ({r.removeprefix(KUBE_NODE + ' ')})" for n, r in sorted(held.items())))


def act_on_replacements(kube: Kube, body: dict, cluster: SlurmCluster, plan: Replacements) -> Cond | None:
    """Cordon bad Kubernetes nodes (the operator's annotation on each), delete the drained workers'
    pods there, lift the operator's cordons once clear; WorkersReplaced (None: no node set asks)."""
    if not any(n.replace_unhealthy for n in cluster.spec.node_sets):
        return None
    refused = []
    for host, bad in plan.cordon.items():
        why = kube.patch_node(host, {"spec": {"unschedulable": True},
                                     "metadata": {"annotations": {CORDONED_ANNOTATION: bad}}})
        if why:
            refused.append(why)
        else:
            kube.event(body, "Warning", "Cordoned", f"Kubernetes node {host} cordoned to move its workers: {bad}")
    for host in plan.uncordon:
        why = kube.patch_node(host, {"spec": {"unschedulable": None},
                                     "metadata": {"annotations": {CORDONED_ANNOTATION: None}}})
        if why:
            refused.append(why)
        else:
            kube.event(body, "Normal", "Uncordoned", f"Kubernetes node {host} is clear again: the operator's "
                                                     "cordon lifted")
    for pod, host in plan.delete.items():
        kube.delete("v1", "Pod", cluster.namespace, pod)
        kube.event(body, "Normal", "Replaced", f"{pod} deleted off {host} (drained): its StatefulSet makes it again "
                                               "elsewhere")
    if refused:
        return Cond("WorkersReplaced", False, "NodePatchFailed", "; ".join(refused))
    if plan.waiting or plan.delete:
        return Cond("WorkersReplaced", True, "Replacing", "; ".join(
            [f"{p} waits for {w}" for p, w in plan.waiting.items()] + [f"{p} moved off {h}" for p, h in plan.delete.items()]))
    return Cond("WorkersReplaced", True, "Healthy", "no worker is on a Kubernetes node a named condition marks bad")


def act_on_topology(kube: Kube, body: dict, seen: Observation, topology: TopologySpec | None,
                    placement: Placement, kube_nodes_read: bool) -> Cond | None:
    """Tell each bound pod its place (its slurmd registers there), set each moved node's place, an
    event each; Topology (None: no spec.topology). A place Slurm refuses (a block its running config
    does not list yet) is named and tried again next pass."""
    for pod, where in placement.annotate.items():
        kube.annotate_pod(body["metadata"]["namespace"], pod, {PLACE_ANNOTATION: where})
    failed = {}
    for name, where in placement.moves.items():
        try:
            seen.client.set_topology(name, where)
        except SlurmError as exc:
            failed[name] = str(exc)
            continue
        kube.event(body, "Normal", "NodePlaced", f"{name} placed at {where} (Kubernetes node "
                                             f"{placement.hosts.get(name, '?')})")
    return topology_condition(topology, placement, failed, seen.nodes is not None and kube_nodes_read)


def act_on_label_features(kube: Kube, body: dict, seen: Observation, listed: bool, features: dict[str, list[str]],
                          known: bool) -> Cond | None:
    """Set each worker's features from its Kubernetes node's labels, an event each; NodeLabelFeatures
    (None: no node set lists a label key). A node Slurm refuses is named and tried again next pass."""
    failed = []
    for name, wanted in features.items():
        try:
            seen.client.set_features(name, wanted)
        except SlurmError as exc:
            failed.append(f"{name}: {exc}")
            continue
        kube.event(body, "Normal", "NodeFeatures", f"{name} features {','.join(wanted)}")
    if not listed and not failed:
        return None
    if failed:
        return Cond("NodeLabelFeatures", False, "SlurmError", "; ".join(failed) + "; retried next pass")
    if not known:
        return Cond("NodeLabelFeatures", None, "Unknown", "Slurm's nodes or the Kubernetes nodes could not be read")
    return Cond("NodeLabelFeatures", True, "Set", "every registered worker carries its Kubernetes node's labels "
                                                  "as features")


def act_on_checks(kube: Kube, body: dict, seen: Observation, plan: CheckPlan, known: bool) -> Cond:
    """Submit the rounds' jobs (recorded in plan.status), drain or comment the failed nodes, an event
    for each failure; HealthChecks. `known`: Slurm's nodes and jobs were read."""
    records = {r["name"]: r for r in plan.status}
    refused, uncancelled = [], []
    for check, node, job_id in plan.cancel:
        try:
            seen.client.cancel_job(job_id)
        except SlurmError as exc:  # still Slurm's: followed again, and cancelled when the next round is due
            records[check]["running"][node] = job_id
            records[check]["skipped"] -= 1
            uncancelled.append(f"cancelling {check}'s job {job_id} on {node}: {exc}")
        else:
            kube.event(body, "Normal", "CheckSkipped", f"{check} skipped {node}: its job {job_id} was still pending "
                       "when the next round was due")
    for step in plan.submit:
        try:
            records[step.check]["running"][step.node] = seen.client.submit_job(step.script, step.job)
        except SlurmError as exc:
            refused.append(f"{step.check} on {step.node}: {exc}")
    for check, node, why in plan.failures:
        kube.event(body, "Warning", "CheckFailed", f"{check} failed on {node}: {why}")
    failed = _each("HealthChecks", "a drain or comment",
                   [partial(seen.client.drain, n, r) for n, r in plan.drain.items()]
                   + [partial(seen.client.set_comment, n, c) for n, c in plan.comment.items()])
    if failed:
        return failed
    if refused or uncancelled:
        return Cond("HealthChecks", False, "SubmitFailed" if refused else "CancelFailed",
                    "; ".join(refused + uncancelled))
    if not known:
        return Cond("HealthChecks", None, "Unknown", "Slurm's nodes or jobs could not be read: no round starts")
    failing = [f"{r['name']}: {', '.join(f'{n} ({why})' for n, why in r['failed'].items())}"
               for r in plan.status if r.get("failed")]
    if failing:
        return Cond("HealthChecks", False, "Failing", "; ".join(failing))
    return Cond("HealthChecks", True, "Passing", "; ".join(
        f"{r['name']}: round of {r.get('lastRound', '?')}, {r.get('passed', 0)} passed, {len(r.get('running') or {})} "
        f"running{f', {skipped} skipped' if (skipped := r.get('skipped')) else ''}" for r in plan.status))


def remove_node_sets(kube: Kube, cluster: SlurmCluster, plan: NodeSetPlan) -> None:
    """Lower a removed node set's StatefulSet as its plan allows; delete it once it has no pod left."""
    for removal in plan.removals.values():
        if removal.replicas is not None:
            kube.patch("apps/v1", "StatefulSet", cluster.namespace, removal.stateful_set,
                       {"spec": {"replicas": removal.replicas}})
        elif removal.delete:
            kube.delete("apps/v1", "StatefulSet", cluster.namespace, removal.stateful_set)


def act_on_maintenance(cluster: SlurmCluster, seen: Observation, holds: dict[str, Hold]) -> Cond:
    """Drain and hold the node sets in maintenance, undo the operator's own maintenance drains of the
    others; Maintenance."""
    try:
        _drain_and_resume(seen, MAINTENANCE, holds)
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


def act_on_scale_in(cluster: SlurmCluster, seen: Observation, scale_ins: dict[str, ScaleIn],
                    now: float | None = None) -> tuple[Cond, dict[str, Waited]]:
    """Drain the nodes that go, undo the operator's own drains of nodes that stay, apply drainTimeout;
    NodeSetsScaled, and per node set what its scale-in waits for."""
    waited: dict[str, Waited] = {}
    try:
        _drain_and_resume(seen, SCALE_IN, scale_ins)
        waited = _waits(cluster, seen, scale_ins, SCALE_IN, now)
    except SlurmError as exc:
        return _failed("NodeSetsScaled", exc), waited
    waiting = [f"{name}: {plan.waiting}" + _jobs_note(waited.get(name)) for name, plan in scale_ins.items() if plan.waiting]
    return _report("NodeSetsScaled", waited, waiting, "Draining" if seen.nodes is not None else "Paused",
                   Cond("NodeSetsScaled", True, "AtSize", "every node set has its spec's replicas")), waited


def _jobs_note(waited: Waited | None) -> str:
    return f" ({len(waited.jobs)} job(s): {', '.join(map(str, waited.jobs))})" if waited and waited.jobs else ""


def act_on_rollouts(kube: Kube, cluster: SlurmCluster, seen: Observation, rollouts: dict[str, Rollout],
                    now: float | None = None) -> Cond:
    """Drain, replace and resume what the rollout planner says, apply drainTimeout; NodeSetsUpdated."""
    try:
        _drain_and_resume(seen, UPDATE, rollouts)
        waited = _waits(cluster, seen, rollouts, UPDATE, now)
    except SlurmError as exc:
        return _failed("NodeSetsUpdated", exc)
    for plan in rollouts.values():
        for pod in plan.delete_pods:
            kube.delete("v1", "Pod", cluster.namespace, pod)
    waiting = [f"{name}: {plan.waiting}" + _jobs_note(waited.get(name))
               for name, plan in rollouts.items() if plan.waiting]
    return _report("NodeSetsUpdated", waited, waiting, "Rolling" if seen.nodes is not None else "Paused",
                   Cond("NodeSetsUpdated", True, "Current", "every worker runs its node set's current template"))
