"""Slurm node states as the operator counts them (sinfo's categories), and the pod conditions it
would write: tables of observed state in, decisions out."""
from __future__ import annotations

import pytest

from soperator.node.layout import NODE_SET_LABEL
from soperator.reconcile.slurm_view import slurm_state_counts, pod_condition, pod_condition_changes
from soperator.slurm import SlurmNode
from tests.conftest import make_cluster


@pytest.mark.parametrize("state,category", [
    (["IDLE", "DYNAMIC_NORM"], "idle"),
    (["ALLOCATED"], "allocated"),
    (["MIXED"], "mixed"),
    (["IDLE", "DRAIN"], "drained"),
    (["ALLOCATED", "DRAIN"], "draining"),
    (["MIXED", "DRAIN"], "draining"),
    (["IDLE", "DRAIN", "COMPLETING"], "draining"),
    (["DOWN", "DRAIN"], "down"),
    (["DOWN", "NOT_RESPONDING"], "down"),
    (["FUTURE", "DYNAMIC_NORM"], "notRegistered"),
    (["UNKNOWN"], "unknown"),
    (["UNKNOWN", "DRAIN"], "unknown"),
    ([], "unknown"),  # no state is not "idle", nor "drained"
    (["SOMETHING_NEW"], "unknown"),
])
def test_states_are_counted_as_sinfo_shows_them(state, category):
    assert SlurmNode(name="n", state=state).category() == category


def _pod(name: str, node_set: str, conditions=()) -> dict:
    return {"metadata": {"name": name, "namespace": "hpc", "labels": {NODE_SET_LABEL: node_set}},
            "status": {"conditions": list(conditions)}}


def test_each_worker_is_counted_once_in_its_node_set():
    cluster = make_cluster(nodeSets=[{"name": "cpu"}, {"name": "gpu"}])
    nodes = {n.name: n for n in [
        SlurmNode(name="demo-cpu-0", state=["IDLE"], features=["cpu"]),
        SlurmNode(name="demo-cpu-1", state=["ALLOCATED", "DRAIN"], features=["cpu", "ib"]),
        SlurmNode(name="demo-cpu-7", state=["FUTURE"], features=["cpu"]),  # a record with no pod
        # An autoscaling node set's powered-down record: room to grow (status' autoscale), no worker.
        SlurmNode(name="demo-gpu-3", state=["IDLE", "CLOUD", "POWERED_DOWN"], features=["gpu"]),
    ]}
    pods = [_pod("demo-cpu-0", "cpu"), _pod("demo-cpu-1", "cpu"), _pod("demo-gpu-0", "gpu")]
    cpu = slurm_state_counts(cluster.spec.node_sets[0], pods, nodes)
    gpu = slurm_state_counts(cluster.spec.node_sets[1], pods, nodes)
    assert {k: v for k, v in cpu.items() if v} == {"idle": 1, "draining": 1, "notRegistered": 1}
    assert {k: v for k, v in gpu.items() if v} == {"notRegistered": 1}


def test_a_condition_is_written_only_when_the_state_changed():
    nodes = {"demo-cpu-0": SlurmNode(name="demo-cpu-0", state=["IDLE", "DRAIN"], reason="bad dimm")}
    fresh = pod_condition_changes([_pod("demo-cpu-0", "cpu")], nodes, "T1")
    (pod, condition), = fresh
    assert condition == {"type": "SlurmNode", "status": "False", "reason": "Drained",
                         "message": "Slurm state IDLE+DRAIN; reason: bad dimm", "lastTransitionTime": "T1"}
    assert pod_condition_changes([_pod("demo-cpu-0", "cpu", [condition])], nodes, "T2") == []
    # Same status, another message: written, with the transition time kept.
    nodes["demo-cpu-0"] = SlurmNode(name="demo-cpu-0", state=["IDLE", "DRAIN"], reason="bad cable")
    (_, again), = pod_condition_changes([_pod("demo-cpu-0", "cpu", [condition])], nodes, "T3")
    assert again["lastTransitionTime"] == "T1" and "bad cable" in again["message"]
    assert pod_condition("demo-cpu-9", nodes)["reason"] == "NotRegistered"
