"""Kubernetes node operations as Slurm's, as a table: worker pods, their Kubernetes nodes and Slurm's
nodes in; drains, downs and resumes out."""
from __future__ import annotations

from soperator.node.drains import KUBE_NODE, SCALE_IN
from soperator.node.layout import CORDONED_ANNOTATION, NODE_SET_LABEL
from soperator.reconcile.kube_nodes import plan_kube_nodes, plan_replacements, trouble
from tests.support.slurm_states import named_nodes


def _pod(name: str, host: str | None) -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeName": host} if host else {}}


def _kube(name: str, ready: str = "True", cordoned: bool = False) -> dict:
    return {"metadata": {"name": name}, "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]}}


def test_a_cordon_or_a_not_ready_node_drains_the_workers_on_it_and_nothing_else():
    pods = [_pod("w-0", "a"), _pod("w-1", "b"), _pod("w-2", "c"), _pod("w-3", None)]
    kube = {"a": _kube("a", cordoned=True), "b": _kube("b", ready="Unknown"), "c": _kube("c")}
    ops = plan_kube_nodes(pods, kube, named_nodes("w-0=ALLOCATED", "w-1=IDLE", "w-2=IDLE", "w-3=IDLE"))
    assert ops.drain == {"w-0": f"{KUBE_NODE} a cordoned", "w-1": f"{KUBE_NODE} b not ready"}
    assert (ops.down, ops.resume) == ({}, [])


def test_only_its_own_drains_are_undone_and_an_owners_drain_is_never_replaced():
    pods = [_pod("w-0", "a"), _pod("w-1", "a"), _pod("w-2", "b")]
    kube = {"a": _kube("a"), "b": _kube("b", cordoned=True)}
    ops = plan_kube_nodes(pods, kube, named_nodes(f"w-0=IDLE+DRAIN:{KUBE_NODE} a cordoned", "w-1=IDLE+DRAIN:admin: bad dimm",
                                             f"w-2=ALLOCATED+DRAIN:{SCALE_IN} of node set cpu"))
    assert (ops.resume, ops.drain, ops.down) == (["w-0"], {}, {})


def test_a_node_gone_sets_its_workers_down_and_unknown_state_does_nothing():
    pods = [_pod("w-0", "gone"), _pod("w-1", "gone")]
    ops = plan_kube_nodes(pods, {}, named_nodes("w-0=ALLOCATED", "w-1=DOWN+NOT_RESPONDING"))
    assert ops.down == {"w-0": f"{KUBE_NODE} gone gone"} and ops.drain == {}
    assert plan_kube_nodes(pods, None, named_nodes("w-0=ALLOCATED")).down == {}  # nodes not readable
    assert plan_kube_nodes(pods, {}, None).down == {}  # Slurm unknown


def test_a_record_whose_pod_is_gone_is_let_go_while_a_pod_waiting_for_a_node_keeps_it():
    slurm = named_nodes(f"w-0=IDLE+CLOUD+DRAIN:{KUBE_NODE} a cordoned", f"w-1=IDLE+CLOUD+DRAIN:{KUBE_NODE} a cordoned")
    ops = plan_kube_nodes([_pod("w-1", None)], {"a": _kube("a", cordoned=True)}, slurm)
    assert ops.resume == ["w-0"]


def _conditions(node: dict, *extra: dict) -> dict:
    node["status"]["conditions"] += list(extra)
    return node


def test_a_condition_the_admin_names_drains_while_true_and_its_drain_alone_is_undone_after():
    bad = {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung",
           "message": "task docker:7 blocked\nfor more than 300 seconds."}
    kube = {"a": _conditions(_kube("a"), bad, {"type": "ReadonlyFilesystem", "status": "False"}),
            "b": _conditions(_kube("b"), {"type": "KernelDeadlock", "status": "False"}),
            "c": _conditions(_kube("c"), {"type": "GpuXid", "status": "True", "reason": "Xid79"})}
    pods = [_pod("w-0", "a"), _pod("w-1", "b"), _pod("w-2", "c")]
    conditions = ("KernelDeadlock", "ReadonlyFilesystem", "GpuXid")
    ops = plan_kube_nodes(pods, kube, named_nodes("w-0=ALLOCATED", "w-1=IDLE", "w-2=IDLE"), conditions)
    assert ops.drain == {"w-0": f"{KUBE_NODE} a KernelDeadlock: task docker:7 blocked for more than 300 seconds.",
                         "w-2": f"{KUBE_NODE} c GpuXid: Xid79"}
    # Not named: a True condition is none of the operator's business.
    assert plan_kube_nodes(pods, kube, named_nodes("w-0=ALLOCATED", "w-1=IDLE", "w-2=IDLE")).drain == {}
    # Cleared: only the operator's drain goes.
    kube["a"]["status"]["conditions"][2]["status"] = "False"
    ops = plan_kube_nodes(pods[:1], kube, named_nodes(f"w-0=ALLOCATED+DRAIN:{KUBE_NODE} a KernelDeadlock: x"), conditions)
    assert (ops.resume, ops.drain) == (["w-0"], {})
    assert len(trouble(_conditions(_kube("d"), {"type": "X", "status": "True", "message": "m" * 500}), ["X"])) == 123


def _worker(name: str, host: str | None, node_set: str = "cpu", deleting: bool = False) -> dict:
    pod = _pod(name, host)
    pod["metadata"]["labels"] = {NODE_SET_LABEL: node_set}
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    return pod


def test_a_worker_on_a_bad_node_is_moved_cordon_first_then_once_drained_and_only_its_cordon_is_lifted():
    bad = {"type": "KernelDeadlock", "status": "True", "message": "hung"}
    kube = {"a": _conditions(_kube("a"), bad), "b": _conditions(_kube("b", cordoned=True), bad), "c": _kube("c"),
            "d": _kube("d", cordoned=True), "e": _kube("e", cordoned=True)}
    kube["d"]["metadata"]["annotations"] = {CORDONED_ANNOTATION: "KernelDeadlock: hung"}  # ours, now clear
    pods = [_worker("w-0", "a"), _worker("w-1", "b"), _worker("w-2", "b"), _worker("w-3", "c"),
            _worker("g-0", "a", node_set="gpu"), _worker("w-4", "b", deleting=True)]
    slurm = named_nodes("w-0=IDLE", "w-1=IDLE+DRAIN:x", "w-2=ALLOCATED+DRAIN:x", "w-3=IDLE", "g-0=IDLE",
                        "w-4=IDLE+DRAIN:x")
    plan = plan_replacements({"cpu"}, pods, kube, slurm, ["KernelDeadlock"])
    assert plan.cordon == {"a": "KernelDeadlock: hung"}  # e: someone else's cordon, never lifted
    assert plan.delete == {"w-1": "b"}
    assert plan.waiting == {"w-0": "a to be cordoned", "w-2": "its jobs to end"}
    assert plan.uncordon == ["d"]
    assert plan_replacements({"cpu"}, pods, None, slurm, ["KernelDeadlock"]) == plan_replacements(set(), [], {}, {}, [])
