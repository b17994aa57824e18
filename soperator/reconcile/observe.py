"""What one reconcile pass sees of Kubernetes: the cluster's children, one list per kind.

Every child the operator renders carries the cluster's instance labels, so one labelled list per kind
finds them all, however many node sets the cluster has. The planners read this snapshot and nothing
else; what a pass writes comes back in the API's answers (`Snapshot.wrote`), so nothing is read twice.
Secrets are the exception: they are read by name (reconcile/secrets.py), since a Secret planted under
one of the cluster's names carries whatever labels its maker chose.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.node.layout import COMPONENT_LABEL, LOGIN, NODE_SET_LABEL, WORKER
from soperator.reconcile.conditions import Cond
from soperator.reconcile.slurm_view import Observation
from soperator.render.common import selector_labels

# (apiVersion, kind) of every child but Secrets and pods.
CHILD_KINDS = (("v1", "ConfigMap"), ("v1", "Service"), ("apps/v1", "StatefulSet"), ("batch/v1", "Job"),
               ("networking.k8s.io/v1", "NetworkPolicy"), ("policy/v1", "PodDisruptionBudget"))


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def instance_selector(cluster: SlurmCluster) -> str:
    """Every child of this cluster, whatever its component."""
    labels = selector_labels(cluster, WORKER)
    labels.pop(COMPONENT_LABEL)
    return _selector(labels)


@dataclass
class Snapshot:
    cluster: SlurmCluster
    body: dict
    children: dict[tuple[str, str], dict]  # (kind, name): the live object
    pods: list[dict] = field(default_factory=list)  # every pod of the cluster's StatefulSets and Jobs
    # Slurm's side, asked once the gates let the pass reach the nodes (core.converge).
    slurm: Observation = field(default_factory=lambda: Observation(None, Cond(
        "SlurmReachable", None, "NotConnected", "not asked yet")))
    # The Kubernetes nodes by name (None: not readable, or not needed: no worker pod placed yet, no
    # topology, no replacement).
    kube_nodes: dict[str, dict] | None = None
    kube_nodes_unread: str = ""  # why kube_nodes is None, when it was asked

    def live(self, kind: str, name: str) -> dict | None:
        return self.children.get((kind, name))

    def wrote(self, obj: dict) -> None:
        """An object this pass applied, as the API answered: what later steps of the pass see."""
        self.children[obj["kind"], obj["metadata"]["name"]] = obj

    def pods_of(self, component: str) -> list[dict]:
        return [p for p in self.pods if (p["metadata"].get("labels") or {}).get(COMPONENT_LABEL) == component]

    @property
    def worker_pods(self) -> list[dict]:
        return self.pods_of(WORKER)

    def login_host_ips(self) -> list[str]:
        """The node addresses login pods run on, in pod name order: where a NodePort answers."""
        pods = sorted(self.pods_of(LOGIN), key=lambda p: p["metadata"]["name"])
        return [ip for p in pods if (ip := (p.get("status") or {}).get("hostIP"))]

    def node_set_stateful_sets(self) -> dict[str, dict]:
        """The worker StatefulSets by node set name, in the spec or not (a removed node set's)."""
        return {sts["metadata"]["labels"][NODE_SET_LABEL]: sts for (kind, _), sts in sorted(self.children.items())
                if kind == "StatefulSet" and NODE_SET_LABEL in (sts["metadata"].get("labels") or {})}


def take(kube: Kube, cluster: SlurmCluster, body: dict) -> Snapshot:
    selector = instance_selector(cluster)
    children = {(kind, obj["metadata"]["name"]): {"apiVersion": api_version, "kind": kind, **obj}
                for api_version, kind in CHILD_KINDS
                for obj in kube.list(api_version, kind, cluster.namespace, selector)}
    snap = Snapshot(cluster, body, children, kube.list("v1", "Pod", cluster.namespace, selector))
    # A topology needs them all (a block topology lists every block its label names), and so does
    # replacement (a cordon of the operator's is lifted once its node is clear, whoever runs there).
    wanted = cluster.spec.topology or any(n.replace_unhealthy for n in cluster.spec.node_sets)
    if wanted or any((p.get("spec") or {}).get("nodeName") for p in snap.worker_pods):
        nodes = kube.nodes()
        snap.kube_nodes, snap.kube_nodes_unread = (None, nodes) if isinstance(nodes, str) else (nodes, "")
    return snap
