"""One level-based reconcile of a SlurmCluster: called on every event and periodically, idempotent.

Order and gates: validate → key Secrets (create if absent, never regenerate) → accounting's slurmdbd
and database → ConfigMaps (slurm.conf names slurmdbd once it is ready) →
populate-jail Job (the rest waits until it succeeded) → Slurm's view of the workers (once the
controller is ready) → drains for scale-ins and removed node sets → controller, node sets, login →
rollouts → status and worker pod conditions.
An object already as desired is not written; a no-op reconcile makes no write call at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from soperator.api import API_VERSION, KIND, SpecError, parse_cluster
from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.reconcile import conditions
from soperator.reconcile.conditions import Cond
from soperator.reconcile.accounting import ensure_accounting
from soperator.reconcile.apply import ensure
from soperator.reconcile.jobs import populate_state
from soperator.reconcile.secrets import ensure_secrets
from soperator.reconcile.node_actions import (act_on_maintenance, act_on_plans, act_on_rollouts, remove_node_sets,
                                              removed_node_sets, rollout_plans, scale_plans)
from soperator.reconcile.slurm_nodes import Connect, connect_in_cluster, observe, slurm_status, worker_pods
from soperator.render import config_maps, slurm_nodes
from soperator.render.login import login_ssh_service_name
from soperator.render.nodes import CONTROLLER, LOGIN, WORKER
from soperator.render.common import object_name
from soperator.render.configs import placeholder_node_name
from soperator.slurm_metrics import Target
from soperator.render.worker import node_set_stateful_set_name


@dataclass
class Result:
    phase: str
    conditions: list[Cond] = field(default_factory=list)
    counts: dict[str, dict] = field(default_factory=dict)
    node_sets: list[dict] = field(default_factory=list)
    slurm_nodes: dict | None = None  # None: unknown this time; the last known counts stay
    endpoint: str | None = None
    slurm: Target | None = None  # how /metrics reads this cluster's Slurm, once it could be reached


def _ready(sts: dict | None) -> dict[str, int]:
    sts = sts or {}
    return {"desired": (sts.get("spec") or {}).get("replicas", 0),
            "ready": (sts.get("status") or {}).get("readyReplicas") or 0}


def _live_sets(kube: Kube, cluster: SlurmCluster) -> dict[str, dict | None]:
    """The cluster's StatefulSets as the apiserver holds them after this pass's apply, by component
    (controller, login) or node set name: read once, for the rollouts and the counts."""
    live = {c: kube.get("apps/v1", "StatefulSet", cluster.namespace, object_name(cluster, c))
            for c in (CONTROLLER, LOGIN)}
    live.update({n.name: kube.get("apps/v1", "StatefulSet", cluster.namespace, node_set_stateful_set_name(cluster, n))
                 for n in cluster.spec.node_sets})
    return live


def _counts(cluster: SlurmCluster, live: dict[str, dict | None]) -> dict[str, dict]:
    out = {name: _ready(sts) for name, sts in live.items()}
    out[WORKER] = {k: sum(out[n.name][k] for n in cluster.spec.node_sets) for k in ("desired", "ready")}
    return out


def _endpoint(kube: Kube, cluster: SlurmCluster) -> str | None:
    svc = kube.get("v1", "Service", cluster.namespace, login_ssh_service_name(cluster)) or {}
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if ingress:
        return f"{ingress[0].get('ip') or ingress[0].get('hostname')}:22"
    spec = svc.get("spec") or {}
    ports = spec.get("ports") or []
    if spec.get("type") == "NodePort" and ports and ports[0].get("nodePort"):
        return f"<node-ip>:{ports[0]['nodePort']}"
    if spec.get("type") == "ClusterIP":
        return f"{login_ssh_service_name(cluster)}.{cluster.namespace}.svc:22"
    return None


def converge(kube: Kube, cluster: SlurmCluster, body: dict, connect: Connect = connect_in_cluster) -> Result:
    conds = [Cond("SpecValid", True, "Valid", "spec accepted")]
    secrets = ensure_secrets(kube, cluster)
    conds.append(secrets)
    if not secrets.ok:
        return Result("Error", conds)
    accounting = ensure_accounting(kube, cluster)
    for obj in config_maps(cluster, accounting_live=bool(accounting and accounting.ok)):
        ensure(kube, obj)
    populated = populate_state(kube, cluster)
    conds.append(populated)
    if not populated.ok:
        return Result("Error" if populated.ok is False else "Populating", conds + ([accounting] if accounting else []))
    controller = kube.get("apps/v1", "StatefulSet", cluster.namespace, object_name(cluster, CONTROLLER))
    seen = observe(kube, cluster, _ready(controller)["ready"] > 0, connect)
    removed = removed_node_sets(kube, cluster)
    plans = scale_plans(kube, cluster, seen, removed)
    scaled, waited = act_on_plans(cluster, seen, plans)
    maintenance = act_on_maintenance(cluster, seen)
    for obj in slurm_nodes(cluster, {name: plan.replicas for name, plan in plans.items()}):
        ensure(kube, obj)
    remove_node_sets(kube, cluster, removed, plans)
    live = _live_sets(kube, cluster)
    pods = worker_pods(kube, cluster, seen)
    rollouts = rollout_plans(cluster, seen, plans, pods, live)
    updated = act_on_rollouts(kube, cluster, seen, rollouts)
    # A pod the rollout deleted gets no condition: its name may already belong to the new pod.
    replaced = {p for r in rollouts.values() for p in r.delete_pods}
    pods = [p for p in pods if p["metadata"]["name"] not in replaced]
    counts = _counts(cluster, live)
    all_ready = True
    for component, label in ((CONTROLLER, "Controller"), (WORKER, "Workers"), (LOGIN, "Login")):
        c = counts[component]
        ready = c["ready"] >= c["desired"]
        all_ready &= ready
        conds.append(Cond(f"{label}Ready", ready, "AllReady" if ready else "NotReady",
                          f"{c['ready']}/{c['desired']} ready"))
    node_sets, slurm_counts = slurm_status(kube, cluster, counts, body, seen, plans, pods, waited)
    conds += [seen.condition, scaled, updated, maintenance] + ([accounting] if accounting else [])
    was_ready = (body.get("status") or {}).get("phase") in ("Ready", "Degraded")
    phase = "Ready" if all_ready else ("Degraded" if was_ready else "Provisioning")
    target = None if seen.client is None else Target(
        cluster.namespace, cluster.name, seen.client, tuple(n.name for n in cluster.spec.node_sets),
        frozenset(placeholder_node_name(cluster, n) for n in cluster.spec.node_sets),
        tuple(p.name for p in cluster.spec.partitions))
    return Result(phase, conds, counts, node_sets, slurm_counts, _endpoint(kube, cluster), target)


def _status(body: dict, result: Result) -> dict:
    old = body.get("status") or {}
    status = {"phase": result.phase, "observedGeneration": body["metadata"].get("generation"),
              "conditions": conditions.merge(old.get("conditions"), result.conditions,
                                             body["metadata"].get("generation"))}
    for component in (CONTROLLER, WORKER, LOGIN):
        if component in result.counts:
            status[component if component != WORKER else "workers"] = result.counts[component]
    if result.node_sets:
        status["nodeSets"] = result.node_sets
    if result.slurm_nodes is not None:
        status["slurmNodes"] = result.slurm_nodes
    if result.endpoint:
        status["loginEndpoint"] = result.endpoint
    return status


def reconcile(kube: Kube, body: dict, connect: Connect = connect_in_cluster) -> Result:
    try:
        cluster = parse_cluster(body)
    except SpecError as exc:
        result = Result("Error", [Cond("SpecValid", False, "InvalidSpec", str(exc))])
    else:
        result = converge(kube, cluster, body, connect)
    old = body.get("status") or {}
    for cond in conditions.transitions(old.get("conditions"), result.conditions):
        if cond.ok is not None:
            kube.event(body, "Normal" if cond.ok else "Warning", cond.reason, f"{cond.type}: {cond.message}")
    status = _status(body, result)
    if {**old, **status} != old:
        meta = body["metadata"]
        kube.patch_status(API_VERSION, KIND, meta["namespace"], meta["name"], status)
    return result
