"""Every step a pass takes on the node sets, planned from its snapshot alone (plan_node_sets): pure,
so each planner is tested from tables of observed state (tests/unit/test_plan.py and one test file
beside each planner) and acted on by node_actions.py.

This module feeds the per-concern planners the snapshot and gathers their answers in one NodeSetPlan:
- `sizing`: an autoscaling node set's replicas, power ups, power downs and given-up records
  (autoscale.py), which become its desired count;
- `scale_in`: every node set's replicas now and the drains that get it there (scale_in.py), the
  removed node sets' included, driven to zero;
- `holds`: maintenance's drains and resumes (maintenance.py);
- `rollouts`: the outdated pods to drain and replace (rollout.py; none drained while in maintenance);
- `kube_nodes`: the drains, downs and resumes that Kubernetes node operations and named node
  conditions ask for (kube_nodes.py), less the nodes another step drains this pass (one owner per drain);
- `topology`: each worker's place from its Kubernetes node's labels (topology.py);
- `replacements`: workers moved off Kubernetes nodes a named condition marks bad (kube_nodes.py);
- `removals`: node sets no longer in the spec, lowered as their scale-in allows, then deleted.
Not here: active health checks (checks.py, planned from Slurm's jobs as well, in core.py) and
drainTimeout (drain_timeout.py, applied by node_actions.py while a step waits for jobs).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from soperator.api.cluster import SlurmCluster
from soperator.api.spec import NodeSetSpec
from soperator.reconcile.autoscale import Sizing, plan_autoscale, pod_start
from soperator.reconcile.kube_nodes import NodeOps, Replacements, plan_kube_nodes, plan_replacements
from soperator.reconcile.label_features import plan_label_features
from soperator.reconcile.maintenance import Hold, plan_maintenance
from soperator.reconcile.observe import Snapshot
from soperator.reconcile.rollout import Rollout, plan_rollout
from soperator.reconcile.scale_in import ScaleIn, plan_scale_in
from soperator.reconcile.slurm_view import node_set_of
from soperator.reconcile.topology import Placement, plan_topology
from soperator.render.worker import node_set_stateful_set_name


@dataclass(frozen=True)
class Removal:
    """A node set no longer in the spec: its StatefulSet lowered as its scale-in allows, then deleted."""

    stateful_set: str
    replicas: int | None = None  # lower the live count to this
    delete: bool = False


@dataclass(frozen=True)
class NodeSetPlan:
    scale_in: dict[str, ScaleIn]  # every node set's replicas now and drains, the removed ones' included
    removals: dict[str, Removal]
    holds: dict[str, Hold]
    rollouts: dict[str, Rollout]
    sizing: dict[str, Sizing] = field(default_factory=dict)  # the autoscaling node sets'
    kube_nodes: NodeOps = field(default_factory=NodeOps)  # what Kubernetes node operations ask of Slurm
    topology: Placement = field(default_factory=Placement)  # each worker's place, by its Kubernetes node's labels
    replacements: Replacements = field(default_factory=Replacements)  # workers moved off bad Kubernetes nodes
    label_features: dict[str, list[str]] = field(default_factory=dict)  # Slurm node: its features, from its node's labels

    def drained(self) -> set[str]:
        """The nodes this plan's steps drain this pass."""
        return ({n for steps in (self.scale_in, self.holds, self.rollouts) for step in steps.values() for n in step.drain}
                | set(self.kube_nodes.drain))

    def replicas(self) -> dict[str, int]:
        """What each node set's StatefulSet gets this pass (render's required argument)."""
        return {name: plan.replicas for name, plan in self.scale_in.items()}


def desired_replicas(node_set: NodeSetSpec, sizing: dict[str, Sizing]) -> int:
    """The count a node set is driven to: the spec's, or what demand asks of an autoscaling one."""
    return sizing[node_set.name].replicas if node_set.name in sizing else node_set.replicas


def in_maintenance(cluster: SlurmCluster, node_set: NodeSetSpec) -> bool:
    return node_set.maintenance or cluster.spec.maintenance


def _replicas(sts: dict | None) -> int | None:
    return None if sts is None else (sts.get("spec") or {}).get("replicas", 0)


def plan_node_sets(snap: Snapshot, now: float) -> NodeSetPlan:
    cluster, nodes = snap.cluster, snap.slurm.nodes
    live = snap.node_set_stateful_sets()
    kept = {n.name for n in cluster.spec.node_sets}
    removed = {name: sts for name, sts in live.items() if name not in kept}
    sizing = {n.name: plan_autoscale(node_set_stateful_set_name(cluster, n), n.autoscale, _replicas(live.get(n.name)),
                                     {p["metadata"]["name"]: pod_start(p) for p in snap.worker_pods
                                      if node_set_of(p) == n.name},
                                     nodes, now, hold=in_maintenance(cluster, n))
              for n in cluster.spec.node_sets if n.autoscale}
    scale = {n.name: plan_scale_in(node_set_stateful_set_name(cluster, n), desired_replicas(n, sizing),
                                   _replicas(live.get(n.name)), nodes) for n in cluster.spec.node_sets}
    scale.update({name: plan_scale_in(sts["metadata"]["name"], 0, _replicas(sts), nodes)
                  for name, sts in removed.items()})
    holds = {n.name: plan_maintenance(node_set_stateful_set_name(cluster, n), in_maintenance(cluster, n), nodes)
             for n in cluster.spec.node_sets}
    rollouts = {}
    for node_set in cluster.spec.node_sets:
        revision = ((live.get(node_set.name) or {}).get("status") or {}).get("updateRevision")
        pods = [p for p in snap.worker_pods if node_set_of(p) == node_set.name]
        plan = plan_rollout(revision, pods, scale[node_set.name].replicas, node_set.max_unavailable, nodes)
        # Maintenance holds the node set: no drain of the rollout's own until it is over.
        rollouts[node_set.name] = replace(plan, drain=[]) if in_maintenance(cluster, node_set) else plan
    # A node another step drains this pass keeps that step's reason: one owner per drain.
    taken = {n for steps in (scale, holds, rollouts) for step in steps.values() for n in step.drain}
    kube_nodes = plan_kube_nodes(snap.worker_pods, snap.kube_nodes, nodes,
                                 cluster.spec.health_check.kubernetes_node_conditions)
    kube_nodes = replace(kube_nodes, drain={n: r for n, r in kube_nodes.drain.items() if n not in taken})
    return NodeSetPlan(scale, {name: _removal(sts, scale[name]) for name, sts in removed.items()}, holds, rollouts,
                       sizing, kube_nodes, plan_topology(cluster.spec.topology, snap.worker_pods, snap.kube_nodes, nodes),
                       plan_replacements({n.name for n in cluster.spec.node_sets if n.replace_unhealthy},
                                         snap.worker_pods, snap.kube_nodes, nodes,
                                         cluster.spec.health_check.kubernetes_node_conditions),
                       plan_label_features(cluster.spec.node_sets, snap.worker_pods, snap.kube_nodes, nodes))


def _removal(sts: dict, plan: ScaleIn) -> Removal:
    name, live = sts["metadata"]["name"], _replicas(sts)
    if plan.replicas < live:
        return Removal(name, replicas=plan.replicas)
    if live == 0 and not (sts.get("status") or {}).get("replicas"):
        return Removal(name, delete=True)
    return Removal(name)
