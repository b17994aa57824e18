"""One level-based reconcile of a SlurmCluster: called on every event and periodically, idempotent.

Order and gates: validate → the Slurm release each part is rendered for (reconcile/upgrade.py; a
refused upgrade stops the pass before any write; so do a node set switched between replicas and autoscale
with workers, and a changed per-pod volume of a live StatefulSet) → key Secrets (create if absent, never regenerate) → accounting's slurmdbd
and database → ConfigMaps (slurm.conf names slurmdbd once it is ready) →
populate-jail Job (the rest waits until it succeeded) → Slurm's view of the workers (slurm_view.py,
once the controller is ready) → the node sets' plan (plan.py) and its Slurm steps (node_actions.py:
scale-in drains, maintenance, power ups and downs, Kubernetes nodes' drains, replacements, topology
places, active checks) → controller, node sets, login applied (render.node_objects) → removed node
sets → rollouts → status and worker pod conditions.
An object already as desired is not written; a no-op reconcile makes no write call at all.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from soperator.api import API_VERSION, KIND, SpecError, parse_cluster
from soperator.api import releases
from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.node.layout import CONTROLLER, LOGIN, PORTS, WORKER
from soperator.reconcile import conditions
from soperator.reconcile.conditions import Cond
from soperator.reconcile.config_nudge import nudge_controller
from soperator.reconcile.accounting import ensure_accounting
from soperator.reconcile.apply import ensure
from soperator.reconcile.identity import directory_condition
from soperator.reconcile.autoscale import mode_changes
from soperator.reconcile.claims import claim_changes
from soperator.reconcile.ready_condition import ready_condition
from soperator.reconcile.jobs import populate_state
from soperator.reconcile.secrets import ensure_secrets
from soperator.reconcile import observe
from soperator.reconcile.node_actions import (act_on_checks, act_on_kube_nodes, act_on_label_features,
                                              act_on_maintenance, act_on_replacements, act_on_rollouts,
                                              act_on_scale_in, act_on_sizing, act_on_topology, remove_node_sets)
from soperator.reconcile.topology import topology_blocks
from soperator.reconcile.checks import plan_checks
from soperator.reconcile.observe import Snapshot
from soperator.reconcile.plan import plan_node_sets
from soperator.reconcile.upgrade import jail_release, observe_parts, part_cluster, plan_upgrade
from soperator.reconcile.slurm_view import Connect, observe_slurm, slurm_status
from soperator.slurm.cluster_client import connect_in_cluster
from soperator.slurm.ctld_metrics import metrics_client
from soperator.render import config_maps, node_objects
from soperator.render.login import login_ssh_service_name
from soperator.render.common import object_name
from soperator.render.controller import metrics_url
from soperator.render.configs import ACCOUNTING_LINE, placeholder_node_name, slurm_configs_name
from soperator.metrics.slurm import Target
from soperator.render.worker import node_set_stateful_set_name


@dataclass
class Result:
    phase: str
    conditions: list[Cond] = field(default_factory=list)
    counts: dict[str, dict] = field(default_factory=dict)
    node_sets: list[dict] = field(default_factory=list)
    slurm_node_counts: dict | None = None  # None: unknown this time; the last known counts stay
    endpoint: str | None = None
    slurm: Target | None = None  # how /metrics reads this cluster's Slurm, once it could be reached
    releases: dict | None = None  # status.slurmRelease
    health_checks: list[dict] = field(default_factory=list)  # status.healthChecks


def _ready(sts: dict | None) -> dict[str, int]:
    sts = sts or {}
    return {"desired": (sts.get("spec") or {}).get("replicas", 0),
            "ready": (sts.get("status") or {}).get("readyReplicas") or 0}


def _pods_per_node_set(snap: Snapshot) -> dict[str, dict]:
    """Desired and ready pods per node set, from the StatefulSets as this pass left them."""
    cluster = snap.cluster
    return {n.name: _ready(snap.live("StatefulSet", node_set_stateful_set_name(cluster, n)))
            for n in cluster.spec.node_sets}


def _pods_per_component(snap: Snapshot, node_sets: dict[str, dict]) -> dict[str, dict]:
    """Desired and ready pods per component (controller, login, workers: every node set's). Apart from
    the node sets': a node set may be named `worker`, as the quick start's is."""
    cluster = snap.cluster
    out = {c: _ready(snap.live("StatefulSet", object_name(cluster, c))) for c in (CONTROLLER, LOGIN)}
    out[WORKER] = {k: sum(counts[k] for counts in node_sets.values()) for k in ("desired", "ready")}
    return out


def _endpoint(snap: Snapshot) -> str | None:
    """Where users ssh to: the load balancer's address; for a NodePort, the node a login pod runs on;
    the Service's in-cluster name while neither exists (or for a ClusterIP)."""
    name = login_ssh_service_name(snap.cluster)
    svc = snap.live("Service", name)
    if svc is None:
        return None
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if ingress:
        return f"{ingress[0].get('ip') or ingress[0].get('hostname')}:{PORTS.ssh}"
    spec = svc.get("spec") or {}
    ports = spec.get("ports") or []
    hosts = snap.login_host_ips()
    if spec.get("type") == "NodePort" and ports and ports[0].get("nodePort") and hosts:
        return f"{hosts[0]}:{ports[0]['nodePort']}"
    return f"{name}.{snap.cluster.namespace}.svc:{PORTS.ssh}"


def _accounting_live(snap: Snapshot, accounting: Cond | None) -> bool:
    """slurm.conf names slurmdbd once slurmdbd first answered, and keeps naming it while slurmdbd
    restarts (an upgrade, a rescheduled pod): slurmctld queues the records for it meanwhile, where a
    config without it would lose them."""
    if accounting is None:
        return False
    if accounting.ok:
        return True
    live = snap.live("ConfigMap", slurm_configs_name(snap.cluster)) or {}
    return ACCOUNTING_LINE in ((live.get("data") or {}).get("slurm.conf") or "")


def converge(kube: Kube, cluster: SlurmCluster, body: dict, connect: Connect = connect_in_cluster,
             operator_namespace: str | None = None) -> Result:
    """Observe (one snapshot), then the gates in order, then plan the node sets and act on the plan."""
    snap = observe.take(kube, cluster, body)
    conds = [Cond("SpecValid", True, "Valid", "spec accepted")]
    upgrade = plan_upgrade(cluster.spec.slurm_version, observe_parts(snap), jail_release(snap))
    conds.append(upgrade.condition())
    if upgrade.refused:
        return Result("Error", conds, releases=upgrade.status())
    for reason, refused in (("NodeSetModeChange", mode_changes(cluster.spec.node_sets, snap.node_set_stateful_sets())),
                            ("VolumeClaimChange", claim_changes(snap))):
        if refused:
            conds[0] = Cond("SpecValid", False, reason, "; ".join(refused) + "; nothing was changed")
            return Result("Error", conds, releases=upgrade.status())
    parts = {part: part_cluster(cluster, upgrade, part) for part in ("accounting", "controller", "workers", "login")}
    secrets = ensure_secrets(kube, cluster)
    conds.append(secrets)
    if not secrets.ok:
        return Result("Error", conds, releases=upgrade.status())
    accounting = ensure_accounting(kube, snap, parts["accounting"])
    # Gates nothing: SSSD serves the users it has seen while the directory is away.
    directory = directory_condition(kube, cluster)
    live_configs = snap.live("ConfigMap", slurm_configs_name(cluster)) or {}
    blocks = topology_blocks(cluster.spec.topology, snap.kube_nodes, (live_configs.get("data") or {}).get("topology.yaml"))
    configs = config_maps(part_cluster(cluster, upgrade, "config"), _accounting_live(snap, accounting), blocks)
    for obj in configs:
        ensure(kube, snap, obj)
    nudge_controller(kube, snap, next(c for c in configs if c["metadata"]["name"] == slurm_configs_name(cluster)))
    populated = populate_state(kube, snap, parts["login"])
    conds.append(populated)
    if not populated.ok:
        return Result("Error" if populated.ok is False else "Populating",
                      conds + [c for c in (accounting, directory) if c], releases=upgrade.status())
    controller = snap.live("StatefulSet", object_name(cluster, CONTROLLER))
    # slurmrestd is the controller pod's: read through the data parser of the release it runs.
    rest = upgrade.rest_release()
    snap.slurm = seen = observe_slurm(kube, part_cluster(cluster, upgrade, "rest"), _ready(controller)["ready"] > 0,
                                      connect)
    plan = plan_node_sets(snap, time.time())
    scaled, waited = act_on_scale_in(cluster, seen, plan.scale_in)
    maintenance = act_on_maintenance(cluster, seen, plan.holds)
    # Powered up before their pods start: a slurmd registering for a powered-down record could be set DOWN.
    sized = act_on_sizing(seen, plan.sizing)
    followed = act_on_kube_nodes(seen, plan.kube_nodes, snap.kube_nodes_unread)
    moved = act_on_replacements(kube, body, cluster, plan.replacements)
    placed = act_on_topology(kube, body, seen, cluster.spec.topology, plan.topology, snap.kube_nodes is not None)
    featured = act_on_label_features(kube, body, seen, any(n.features_from_node_labels for n in cluster.spec.node_sets),
                                     plan.label_features, seen.nodes is not None and snap.kube_nodes is not None)
    jobs = seen.all_jobs() if cluster.spec.health_check.active else None
    checks = plan_checks(cluster, seen.nodes, jobs, (body.get("status") or {}).get("healthChecks") or [], time.time(),
                         plan.drained())
    checked = act_on_checks(kube, body, seen, checks, jobs is not None) if cluster.spec.health_check.active else None
    for obj in node_objects(cluster, plan.replicas(), operator_namespace, parts):
        ensure(kube, snap, obj)
    remove_node_sets(kube, cluster, plan)
    updated = act_on_rollouts(kube, cluster, seen, plan.rollouts)
    # A pod the rollout deleted gets no condition: its name may already belong to the new pod.
    replaced = {p for r in plan.rollouts.values() for p in r.delete_pods} | set(plan.replacements.delete)
    pods = [p for p in snap.worker_pods if p["metadata"]["name"] not in replaced] if seen.nodes is not None else []
    per_node_set = _pods_per_node_set(snap)
    counts = _pods_per_component(snap, per_node_set)
    all_ready = True
    for component, label in ((CONTROLLER, "Controller"), (WORKER, "Workers"), (LOGIN, "Login")):
        c = counts[component]
        ready = c["ready"] >= c["desired"]
        all_ready &= ready
        conds.append(ready_condition(label, c["ready"], c["desired"], snap.pods_of(component)))
    node_sets, slurm_counts = slurm_status(kube, cluster, per_node_set, body, seen, plan.scale_in, pods, waited, plan.sizing)
    conds += [seen.condition, scaled, updated, maintenance, followed] + [
        c for c in (sized, moved, placed, featured, checked, accounting, directory) if c]
    was_ready = (body.get("status") or {}).get("phase") in ("Ready", "Degraded")
    phase = "Ready" if all_ready else ("Degraded" if was_ready else "Provisioning")
    metrics = metrics_client(seen.client, metrics_url(cluster)) if seen.client is not None and \
        releases.at_least(rest, releases.OPENMETRICS) else None
    target = None if seen.client is None else Target(
        cluster.namespace, cluster.name, seen.client, metrics,
        tuple(n.name for n in cluster.spec.node_sets),
        frozenset(placeholder_node_name(cluster, n) for n in cluster.spec.node_sets))
    return Result(phase, conds, counts, node_sets, slurm_counts, _endpoint(snap), target, upgrade.status(),
                  checks.status)


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
    if result.slurm_node_counts is not None:
        status["slurmNodes"] = result.slurm_node_counts
    if result.endpoint:
        status["loginEndpoint"] = result.endpoint
    if result.releases is not None:
        status["slurmRelease"] = result.releases
    if result.health_checks or old.get("healthChecks"):
        status["healthChecks"] = result.health_checks or None  # None: the checks were removed
    return status


def reconcile(kube: Kube, body: dict, connect: Connect = connect_in_cluster, operator_namespace: str | None = None) -> Result:
    """`operator_namespace`: where the operator runs (render.node_objects)."""
    try:
        cluster = parse_cluster(body)
    except SpecError as exc:
        result = Result("Error", [Cond("SpecValid", False, "InvalidSpec", str(exc))])
    else:
        result = converge(kube, cluster, body, connect, operator_namespace)
    old = body.get("status") or {}
    for cond in conditions.transitions(old.get("conditions"), result.conditions):
        if cond.ok is not None:
            kube.event(body, "Normal" if cond.ok else "Warning", cond.reason, f"{cond.type}: {cond.message}")
    status = _status(body, result)
    if {**old, **status} != old:
        meta = body["metadata"]
        kube.patch_status(API_VERSION, KIND, meta["namespace"], meta["name"], status)
    return result
