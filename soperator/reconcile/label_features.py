"""Kubernetes node labels as Slurm features: pure, the node sets, the worker pods, the Kubernetes nodes
and Slurm's nodes in, each registered worker's new feature list out.

A node set lists label keys (spec featuresFromNodeLabels); each of its workers' Slurm nodes carries
`key=value` for each of them that the Kubernetes node its pod runs on has, beside the node set's own
features, so that `sbatch --constraint=topology.kubernetes.io/zone=eu-1a` lands where Kubernetes put
the pod. The operator sets them through slurmrestd once slurmd registered, and again when the labels
change; a pod that moves is a new registration, set again on its new node. Until then the node just
lacks the feature: no job that asks for it lands there (a job asking for a value no node has yet is
refused at submission by Slurm). A feature with `=` on a worker is the operator's: the node set's own
features cannot hold one (SlurmName), so one whose key is no longer listed is taken away.
"""
from __future__ import annotations

from soperator.api.spec import NodeSetSpec
from soperator.reconcile.slurm_view import UNREGISTERED, labels_of, node_set_of
from soperator.slurm import SlurmNode


def label_features(keys: list[str], labels: dict[str, str]) -> list[str]:
    """The features a Kubernetes node's labels give, in the order the keys are listed; a label that is
    missing or empty gives none."""
    return [f"{key}={labels[key]}" for key in keys if labels.get(key)]


def plan_label_features(node_sets: list[NodeSetSpec], pods: list[dict], kube_nodes: dict[str, dict] | None,
                        slurm: dict[str, SlurmNode] | None) -> dict[str, list[str]]:
    """Slurm node -> its whole new feature list, for the registered workers whose features differ from
    what their Kubernetes node's labels say (order aside). Nothing while either side is unknown."""
    if kube_nodes is None or slurm is None:
        return {}
    keys_of = {n.name: n.features_from_node_labels for n in node_sets}
    out = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name, host = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        keys = keys_of.get(node_set_of(pod))
        node = slurm.get(name)
        if keys is None or host not in kube_nodes or node is None or node.category() in UNREGISTERED:
            continue
        features = [f for f in node.features if "=" not in f] + label_features(keys, labels_of(kube_nodes[host]))
        if sorted(features) != sorted(node.features):
            out[name] = features
    return out
