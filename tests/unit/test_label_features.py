"""The label features planner from snapshots: which registered workers get which features from the
labels of the Kubernetes node their pod runs on (reconcile/label_features.py)."""
from soperator.node.layout import NODE_SET_LABEL
from soperator.reconcile.label_features import label_features, plan_label_features
from soperator.slurm import SlurmNode
from tests.conftest import make_cluster

ZONE, TYPE = "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"


def _pod(name: str, node_set: str, host: str | None) -> dict:
    return {"metadata": {"name": name, "labels": {NODE_SET_LABEL: node_set}}, "spec": {"nodeName": host} if host else {}}


def _node(host: str, **labels: str) -> dict:
    return {"metadata": {"name": host, "labels": labels}}


def _slurm(name: str, features: list[str], state: str = "IDLE") -> SlurmNode:
    return SlurmNode(name=name, state=[state], features=features)


def _node_sets(**keys):
    spec = [{"name": name, "featuresFromNodeLabels": k} for name, k in keys.items()]
    return make_cluster(nodeSets=spec, partitions=[{"name": "main", "default": True}]).spec.node_sets


def test_labels_in_the_keys_order_and_a_missing_or_empty_label_gives_nothing():
    assert label_features([ZONE, TYPE, "x"], {TYPE: "m5", ZONE: "z1", "x": ""}) == [f"{ZONE}=z1", f"{TYPE}=m5"]


def test_each_registered_worker_gets_its_nodes_labels_beside_its_own_features():
    node_sets = _node_sets(cpu=[ZONE, TYPE], big=[])
    pods = [_pod("c-cpu-0", "cpu", "a"), _pod("c-cpu-1", "cpu", "b"), _pod("c-big-0", "big", "a"),
            _pod("c-cpu-2", "cpu", None), _pod("c-cpu-3", "cpu", "gone")]
    kube = {"a": _node("a", **{ZONE: "z1", TYPE: "m5"}), "b": _node("b", **{ZONE: "z2"})}
    slurm = {"c-cpu-0": _slurm("c-cpu-0", ["cpu", "ib"]),
             "c-cpu-1": _slurm("c-cpu-1", ["cpu", f"{ZONE}=z2"]),  # already right: nothing to do
             "c-big-0": _slurm("c-big-0", ["big", f"{ZONE}=old"]),  # its node set lists no key now
             "c-cpu-2": _slurm("c-cpu-2", ["cpu"]), "c-cpu-3": _slurm("c-cpu-3", ["cpu"])}
    assert plan_label_features(node_sets, pods, kube, slurm) == {
        "c-cpu-0": ["cpu", "ib", f"{ZONE}=z1", f"{TYPE}=m5"], "c-big-0": ["big"]}


def test_a_changed_label_replaces_its_feature_and_order_alone_changes_nothing():
    node_sets = _node_sets(cpu=[ZONE])
    pods = [_pod("c-cpu-0", "cpu", "a")]
    slurm = {"c-cpu-0": _slurm("c-cpu-0", [f"{ZONE}=z1", "cpu"])}
    assert plan_label_features(node_sets, pods, {"a": _node("a", **{ZONE: "z1"})}, slurm) == {}
    assert plan_label_features(node_sets, pods, {"a": _node("a", **{ZONE: "z9"})}, slurm) == {
        "c-cpu-0": ["cpu", f"{ZONE}=z9"]}


def test_nothing_while_either_side_is_unknown_or_the_slurmd_has_not_registered():
    node_sets = _node_sets(cpu=[ZONE])
    pods = [_pod("c-cpu-0", "cpu", "a")]
    kube = {"a": _node("a", **{ZONE: "z1"})}
    assert plan_label_features(node_sets, pods, None, {"c-cpu-0": _slurm("c-cpu-0", ["cpu"])}) == {}
    assert plan_label_features(node_sets, pods, kube, None) == {}
    assert plan_label_features(node_sets, pods, kube, {"c-cpu-0": _slurm("c-cpu-0", ["cpu"], "FUTURE")}) == {}
    assert plan_label_features(node_sets, pods, kube, {}) == {}
    # A pod of a node set no longer in the spec is left alone (its removal drains it).
    assert plan_label_features(node_sets, [_pod("c-old-0", "old", "a")], kube,
                               {"c-old-0": _slurm("c-old-0", ["old", f"{ZONE}=z0"])}) == {}
