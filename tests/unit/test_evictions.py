"""Which worker pods an eviction may take, as a table: Slurm's state of each pod's node in, the
evictable label's changes out."""
from __future__ import annotations

from soperator.node.layout import EVICTABLE_LABEL
from soperator.reconcile.evictions import label_changes
from soperator.slurm import SlurmNode


def _pod(name: str, evictable: bool = False) -> dict:
    return {"metadata": {"name": name, "labels": {EVICTABLE_LABEL: "true"} if evictable else {"app": "x"}}}


def _slurm(**states: str) -> dict[str, SlurmNode]:
    return {name: SlurmNode(name=name, state=state.split("+")) for name, state in states.items()}


def test_only_a_node_that_can_run_no_job_is_evictable():
    pods = [_pod(n) for n in ("idle", "busy", "draining", "completing", "drained", "down", "unregistered",
                              "powering", "unknown")]
    nodes = _slurm(idle="IDLE", busy="ALLOCATED", draining="MIXED+DRAIN", completing="IDLE+DRAIN+COMPLETING",
                   drained="IDLE+DRAIN", down="DOWN+NOT_RESPONDING", powering="IDLE+CLOUD+POWERING_UP",
                   unknown="UNKNOWN+DRAIN")
    assert [(p["metadata"]["name"], want) for p, want in label_changes(pods, nodes)] == [
        ("drained", True), ("down", True)]


def test_a_resumed_node_loses_the_label_and_an_unchanged_one_is_not_written():
    pods = [_pod("resumed", evictable=True), _pod("still", evictable=True), _pod("gone", evictable=True),
            _pod("quiet")]
    nodes = _slurm(resumed="IDLE", still="IDLE+DRAIN", quiet="ALLOCATED")
    # "gone": Slurm has no record of it any more, and its slurmd may register again at any moment.
    assert [(p["metadata"]["name"], want) for p, want in label_changes(pods, nodes)] == [
        ("resumed", False), ("gone", False)]
