"""Each worker's place in Slurm's topology, as a table: worker pods, labelled Kubernetes nodes and Slurm's
nodes in; places to set, nodes left unplaced and why, and the blocks topology.yaml lists, out."""
from __future__ import annotations

import pytest

from soperator.api import SpecError
from soperator.api.topology import TopologySpec, block_sizes_problem
from soperator.node.layout import ENV, PLACE_ANNOTATION, PLACEMENT_VOLUME
from soperator.node.placement import registration_conf, wait_for_place
from soperator.reconcile.topology import awaits_place, plan_topology, topology_blocks, topology_condition
from soperator.render.worker import worker_stateful_set
from soperator.render.configs import slurm_files
from tests.conftest import make_cluster
from tests.support.slurm_states import named_nodes

SPINE, LEAF, CLIQUE = "example.com/spine", "example.com/leaf", "nvidia.com/gpu.clique"
TREE = TopologySpec.model_validate({"tree": {"levels": [SPINE, LEAF]}})
BLOCK = TopologySpec.model_validate({"block": {"label": CLIQUE, "blockSizes": [2, 4]}})


def _pod(name: str, host: str | None) -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeName": host} if host else {}}


def _kube(**labels_by_node: dict) -> dict[str, dict]:
    return {name: {"metadata": {"name": name, "labels": labels}} for name, labels in labels_by_node.items()}


def test_a_tree_place_is_the_switch_path_from_the_root_and_only_moved_nodes_are_set():
    pods = [_pod("w-0", "a"), _pod("w-1", "b"), _pod("w-2", "b"), _pod("w-3", None)]
    kube = _kube(a={SPINE: "s1", LEAF: "l1"}, b={SPINE: "s1", LEAF: "l2"})
    plan = plan_topology(TREE, pods, kube, named_nodes("w-0=IDLE", "w-1=ALLOCATED@default:_root:s1:l2", "w-2=IDLE@x",
                                                  "w-3=IDLE"))
    assert plan.wanted == {"w-0": "default:_root:s1:l1", "w-1": "default:_root:s1:l2", "w-2": "default:_root:s1:l2"}
    assert plan.moves == {"w-0": "default:_root:s1:l1", "w-2": "default:_root:s1:l2"}
    assert plan.unplaced == {} and plan.hosts == {"w-0": "a", "w-1": "b", "w-2": "b"}


def test_every_bound_pod_is_told_its_place_before_its_slurmd_registers_and_only_once():
    pods = [_pod("w-0", "a"), _pod("w-1", "a"), _pod("w-2", "b"), _pod("w-3", None), _pod("w-4", "a")]
    pods[1]["metadata"]["annotations"] = {PLACE_ANNOTATION: "default:_root:s1:l1"}
    pods[4]["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    kube = _kube(a={SPINE: "s1", LEAF: "l1"}, b={SPINE: "s1"})
    plan = plan_topology(TREE, pods, kube, None)  # Slurm unknown, or not asked yet: the pods' places still
    assert plan.annotate == {"w-0": "default:_root:s1:l1"}
    assert (plan.wanted, plan.moves, plan.unplaced) == ({}, {}, {})
    pods[1]["metadata"]["annotations"] = {PLACE_ANNOTATION: "default:_root:s9:l9"}  # its node's labels changed
    assert plan_topology(TREE, pods, kube, named_nodes("w-0=FUTURE")).annotate == \
        {"w-0": "default:_root:s1:l1", "w-1": "default:_root:s1:l1"}
    assert plan_topology(None, pods, kube, None).annotate == {}


def test_a_bound_pod_that_reads_its_place_awaits_it_until_it_is_written():
    volume = {"name": PLACEMENT_VOLUME, "downwardAPI": {}}
    bound = {"metadata": {"name": "w-0"}, "spec": {"nodeName": "a", "volumes": [volume]}}
    assert awaits_place(bound)
    assert not awaits_place({**bound, "spec": {"volumes": [volume]}})  # not scheduled yet
    assert not awaits_place({**bound, "spec": {"nodeName": "a", "volumes": []}})  # a CLOUD record's pod
    assert not awaits_place({**bound, "metadata": {"name": "w-0", "annotations": {PLACE_ANNOTATION: "default:x"}}})
    assert not awaits_place({**bound, "metadata": {"name": "w-0", "deletionTimestamp": "2026-11-27T00:00:00Z"}})


def test_only_a_topologys_dynamic_nodes_read_their_place_from_the_downward_api():
    node_sets = [{"name": "cpu"}, {"name": "gpu", "autoscale": {"max": 2}}]
    cluster = make_cluster(nodeSets=node_sets, topology=TREE.wire())

    def pod(c, index: int) -> dict:
        return worker_stateful_set(c, c.spec.node_sets[index], 1)["spec"]["template"]["spec"]
    fixed = pod(cluster, 0)
    volume = next(v for v in fixed["volumes"] if v["name"] == PLACEMENT_VOLUME)
    assert volume["downwardAPI"]["items"] == [
        {"path": "place", "fieldRef": {"fieldPath": f"metadata.annotations['{PLACE_ANNOTATION}']"}}]
    container = fixed["containers"][0]
    assert {"name": ENV.place_file, "value": "/etc/soperator/placement/place"} in container["env"]
    assert {"name": PLACEMENT_VOLUME, "mountPath": "/etc/soperator/placement", "readOnly": True} in \
        container["volumeMounts"]
    for spec in (pod(cluster, 1), pod(make_cluster(nodeSets=node_sets), 0)):
        assert PLACEMENT_VOLUME not in {v["name"] for v in spec["volumes"]}
        assert ENV.place_file not in {e["name"] for e in spec["containers"][0]["env"]}


def test_slurmd_registers_at_the_place_written_and_without_one_after_the_wait(tmp_path):
    place = tmp_path / "place"
    assert wait_for_place(str(place), 0) == ""  # no file (yet): after the wait, unplaced
    place.write_text("")
    assert wait_for_place(str(place), 0) == ""  # the annotation not set: the kubelet writes an empty file
    place.write_text("default:_root:s1:l1\n")
    assert wait_for_place(str(place), 60) == "default:_root:s1:l1"
    place.write_text("default:x Weight=1")
    assert wait_for_place(str(place), 60) == ""  # never another --conf key
    stops = iter([False, True])
    place.write_text("")
    assert wait_for_place(str(place), 60, stop=lambda: next(stops), poll=0) == ""
    assert registration_conf("CPUs=2 Feature=ib", "default:b1") == "CPUs=2 Feature=ib Topology=default:b1"
    assert registration_conf("CPUs=2", "") == "CPUs=2"


def test_a_node_not_registered_or_unknown_is_not_placed_yet():
    plan = plan_topology(TREE, [_pod("w-0", "a"), _pod("w-1", "a")], _kube(a={SPINE: "s", LEAF: "l"}),
                         named_nodes("w-0=FUTURE", "w-1=UNKNOWN"))
    assert (plan.wanted, plan.moves, plan.unplaced) == ({}, {}, {})


def test_a_missing_label_or_a_switch_named_at_two_places_leaves_the_node_where_it_is():
    pods = [_pod("w-0", "a"), _pod("w-1", "b"), _pod("w-2", "c"), _pod("w-3", "d")]
    # l1 under s1 and under s2: one switch name for two switches; s9 a spine and a leaf.
    kube = _kube(a={SPINE: "s1"}, b={SPINE: "s1", LEAF: "l1"}, c={SPINE: "s2", LEAF: "l1"}, d={SPINE: "s3", LEAF: "s9"},
                 e={SPINE: "s9", LEAF: "l7"})
    plan = plan_topology(TREE, pods, kube, named_nodes("w-0=IDLE", "w-1=IDLE", "w-2=IDLE", "w-3=IDLE"))
    assert plan.unplaced == {"w-0": f"a: no label {LEAF}",
                             "w-1": "b: switch l1 is at s1 > l1 and at s2 > l1",
                             "w-2": "c: switch l1 is at s1 > l1 and at s2 > l1",
                             "w-3": "d: switch s9 is at s3 > s9 and at s9"}
    assert plan.moves == {}
    cond = topology_condition(TREE, plan, {}, True)
    assert (cond.ok, cond.reason) == (False, "Unplaced") and "w-0 (a: no label example.com/leaf)" in cond.message


def test_a_block_place_names_the_block_and_the_blocks_are_every_nodes_value():
    kube = _kube(a={CLIQUE: "nvl-2"}, b={CLIQUE: "nvl-1"}, c={"other": "x"})
    plan = plan_topology(BLOCK, [_pod("w-0", "a"), _pod("w-1", "b")], kube, named_nodes("w-0=IDLE", "w-1=MIXED"))
    assert plan.moves == {"w-0": "default:nvl-2", "w-1": "default:nvl-1"}
    assert topology_blocks(BLOCK, kube, None) == ("nvl-1", "nvl-2")
    assert topology_blocks(TREE, kube, None) == ()


def test_while_the_kubernetes_nodes_are_unreadable_the_blocks_listed_stay_and_nothing_moves():
    listed = slurm_files(make_cluster(topology=BLOCK.wire()), blocks=("nvl-1", "123"))["topology.yaml"]
    assert topology_blocks(BLOCK, None, listed) == ("123", "nvl-1")
    nothing = slurm_files(make_cluster(topology=BLOCK.wire()))["topology.yaml"]
    assert topology_blocks(BLOCK, None, nothing) == ()
    assert topology_blocks(BLOCK, None, "{not yaml") == ()
    assert plan_topology(BLOCK, [_pod("w-0", "a")], None, named_nodes("w-0=IDLE")).moves == {}
    assert topology_condition(BLOCK, plan_topology(BLOCK, [], None, {}), {}, False).ok is None


def test_the_condition_counts_the_placed_and_names_a_place_slurm_refused():
    plan = plan_topology(BLOCK, [_pod("w-0", "a"), _pod("w-1", "a")], _kube(a={CLIQUE: "n"}),
                         named_nodes("w-0=IDLE@default:n", "w-1=IDLE"))
    assert topology_condition(BLOCK, plan, {}, True).message.startswith("2 registered workers placed")
    refused = topology_condition(BLOCK, plan, {"w-1": "Invalid node topology"}, True)
    assert refused.ok is False and refused.message == "w-1 (Slurm refused default:n: Invalid node topology)"
    assert topology_condition(None, plan, {}, True) is None


def test_topology_yaml_is_rendered_only_with_a_topology_and_quotes_every_block():
    assert "topology.yaml" not in slurm_files(make_cluster())
    tree = slurm_files(make_cluster(topology=TREE.wire()))["topology.yaml"]
    assert "  tree:\n    switches:\n      - switch: _root\n" in tree and "cluster_default: true" in tree
    block = slurm_files(make_cluster(topology=BLOCK.wire()), blocks=("true", "7"))["topology.yaml"]
    assert 'block_sizes: [2, 4]\n    blocks:\n      - block: "7"\n      - block: "true"\n' in block


def test_autoscaling_records_wait_under_their_own_unit_until_their_pods_run():
    node_sets = [{"name": "gpu", "autoscale": {"max": 4}}, {"name": "one", "autoscale": {"max": 1}}, {"name": "cpu"}]
    tree = slurm_files(make_cluster(nodeSets=node_sets, topology=TREE.wire()))["topology.yaml"]
    assert ("      - switch: _root\n        children: _unplaced\n" in tree and
            "      - switch: _unplaced\n        nodes: demo-gpu-[0-3],demo-one-0\n" in tree)
    block = slurm_files(make_cluster(nodeSets=node_sets, topology=BLOCK.wire()))["topology.yaml"]
    assert "      - block: _unplaced\n        nodes: demo-gpu-[0-3],demo-one-0\n" in block and "_none" not in block
    assert topology_blocks(BLOCK, None, block) == ()


@pytest.mark.parametrize("sizes, problem", [([4], None), ([4, 8, 32], None), ([3, 6, 12], None),
                                            ([4, 12], "12"), ([8, 4], "4"), ([4, 4], "4"), ([1, 1 << 16], "65536")])
def test_block_sizes_follow_slurms_rule(sizes, problem):
    found = block_sizes_problem(sizes)
    assert (found is None) if problem is None else found.startswith(f"{problem}:")


@pytest.mark.parametrize("topology, slurm_version, extra, field", [
    ({"tree": {"levels": ["example.com/bad key"]}}, "26.05", {}, "spec.topology.tree.levels[0]"),
    ({"block": {"label": CLIQUE}}, "26.05", {}, "spec.topology.block.blockSizes"),
    ({"tree": {"levels": [LEAF]}, "block": {"label": CLIQUE, "blockSizes": [2]}}, "26.05", {}, "spec.topology"),
    ({"tree": {"levels": [LEAF]}}, "24.11", {}, "spec.topology"),
    ({"tree": {"levels": [LEAF]}}, "26.05", {"TopologyPlugin": "topology/tree"}, "spec.slurmConfig.extra.TopologyPlugin"),
])
def test_a_topology_slurm_or_kubernetes_would_refuse_is_refused_with_its_field(topology, slurm_version, extra, field):
    with pytest.raises(SpecError) as exc:
        make_cluster(topology=topology, slurmVersion=slurm_version, slurmConfig={"extra": extra})
    assert str(exc.value).startswith(f"{field}: "), exc.value
