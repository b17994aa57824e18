"""Kubernetes node operations as Slurm's, as a table: worker pods, their Kubernetes nodes and Slurm's
nodes in; drains, downs and resumes out."""
from __future__ import annotations

from soperator.node.drains import KUBE_NODE, SCALE_IN
from soperator.reconcile.kube_nodes import plan_kube_nodes
from soperator.slurm import SlurmNode


def _pod(name: str, host: str | None) -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeName": host} if host else {}}


def _kube(name: str, ready: str = "True", cordoned: bool = False) -> dict:
    return {"metadata": {"name": name}, "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]}}


def _slurm(*specs: str) -> dict[str, SlurmNode]:
    """`name=BASE+FLAGS[:reason]`."""
    out = {}
    for spec in specs:
        name, _, state = spec.partition("=")
        base, _, reason = state.partition(":")
        out[name] = SlurmNode(name=name, state=base.split("+"), reason=reason)
    return out


def test_a_cordon_or_a_not_ready_node_drains_the_workers_on_it_and_nothing_else():
    pods = [_pod("w-0", "a"), _pod("w-1", "b"), _pod("w-2", "c"), _pod("w-3", None)]
    kube = {"a": _kube("a", cordoned=True), "b": _kube("b", ready="Unknown"), "c": _kube("c")}
    ops = plan_kube_nodes(pods, kube, _slurm("w-0=ALLOCATED", "w-1=IDLE", "w-2=IDLE", "w-3=IDLE"))
    assert ops.drain == {"w-0": f"{KUBE_NODE} a cordoned", "w-1": f"{KUBE_NODE} b not ready"}
    assert (ops.down, ops.resume) == ({}, [])


def test_only_its_own_drains_are_undone_and_an_owners_drain_is_never_replaced():
    pods = [_pod("w-0", "a"), _pod("w-1", "a"), _pod("w-2", "b")]
    kube = {"a": _kube("a"), "b": _kube("b", cordoned=True)}
    ops = plan_kube_nodes(pods, kube, _slurm(f"w-0=IDLE+DRAIN:{KUBE_NODE} a cordoned", "w-1=IDLE+DRAIN:admin: bad dimm",
                                             f"w-2=ALLOCATED+DRAIN:{SCALE_IN} of node set cpu"))
    assert (ops.resume, ops.drain, ops.down) == (["w-0"], {}, {})


def test_a_node_gone_sets_its_workers_down_and_unknown_state_does_nothing():
    pods = [_pod("w-0", "gone"), _pod("w-1", "gone")]
    ops = plan_kube_nodes(pods, {}, _slurm("w-0=ALLOCATED", "w-1=DOWN+NOT_RESPONDING"))
    assert ops.down == {"w-0": f"{KUBE_NODE} gone gone"} and ops.drain == {}
    assert plan_kube_nodes(pods, None, _slurm("w-0=ALLOCATED")).down == {}  # nodes not readable
    assert plan_kube_nodes(pods, {}, None).down == {}  # Slurm unknown


def test_a_record_whose_pod_is_gone_is_let_go_while_a_pod_waiting_for_a_node_keeps_it():
    slurm = _slurm(f"w-0=IDLE+CLOUD+DRAIN:{KUBE_NODE} a cordoned", f"w-1=IDLE+CLOUD+DRAIN:{KUBE_NODE} a cordoned")
    ops = plan_kube_nodes([_pod("w-1", None)], {"a": _kube("a", cordoned=True)}, slurm)
    assert ops.resume == ["w-0"]
