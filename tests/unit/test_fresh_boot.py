"""What a new worker container reads from slurmctld's record of its node before slurmd starts: does it
still count jobs there (they died with the previous container), and whose drain is it."""
from __future__ import annotations

import pytest

from soperator.node.drains import CONTAINER_RESTARTED
from soperator.node.fresh_boot import Record, down_reason, forget_refusal


def _record(state: list[str], reason: str = "", instance: str = "") -> Record:
    # The shape of `scontrol --json show node NAME` (data_parser), trimmed to what is read.
    data = {"nodes": [{"name": "w-0", "state": state, "reason": reason, "instance_id": instance}],
            "errors": [], "warnings": []}
    return Record.parse(data, "w-0")


@pytest.mark.parametrize("state, busy", [
    (["ALLOCATED"], True),
    (["MIXED", "DRAIN"], True),
    (["IDLE", "COMPLETING"], True),
    (["ALLOCATED", "NOT_RESPONDING"], True),   # the old slurmd is silent: its jobs are still counted
    (["IDLE"], False),
    (["IDLE", "DRAIN"], False),
    (["DOWN"], False),                         # jobs already ended with the node
    (["FUTURE"], False),
    # A CLOUD node Slurm powers up for a job: the job waits for this container's slurmd, it did not die.
    (["ALLOCATED", "CLOUD", "NOT_RESPONDING", "POWERING_UP"], False),
])
def test_a_node_is_busy_while_slurmctld_counts_jobs_on_it(state, busy):
    assert _record(state).busy is busy


def test_the_reason_is_read_whole_and_other_nodes_are_not_taken_for_this_one():
    node = _record(["MIXED", "DRAIN"], "admin: bad fan", "uid/1")
    assert (node.reason, node.instance_id) == ("admin: bad fan", "uid/1")
    assert Record.parse({"nodes": [{"name": "w-1", "state": ["IDLE"]}]}, "w-0") is None


@pytest.mark.parametrize("state, reason, given", [
    (["ALLOCATED"], "", CONTAINER_RESTARTED),
    (["MIXED", "DRAIN"], "admin: bad fan", "admin: bad fan"),     # drained: returns drained, same words
    (["ALLOCATED", "FAIL"], "admin: ecc errors", "admin: ecc errors"),
    (["ALLOCATED", "DRAIN"], "", CONTAINER_RESTARTED),                         # a drain with no reason: ours
    (["ALLOCATED"], "Not responding", CONTAINER_RESTARTED),                     # not a drain: Slurm's word is replaced
])
def test_the_down_keeps_a_drain_and_its_reason(state, reason, given):
    assert down_reason(_record(state, reason)) == given


@pytest.mark.parametrize("node, failure, refused", [
    (_record(["IDLE"], instance="pod-a/1"), "", ""),                       # its own record: deleted
    (_record(["DOWN"], instance="pod-a/1"), "", ""),                       # its own, down: deleted too
    (_record(["IDLE"], instance="pod-b/2"), "", "another container's"),    # taken over by its successor
    (_record(["IDLE"], instance=""), "", "another container's"),
    (None, "", "no record"),
    (None, "Unable to contact slurm controller", "Unable to contact"),    # unknown is never "mine"
])
def test_a_stopping_container_deletes_only_its_own_record(node, failure, refused):
    why = forget_refusal(node, failure, "pod-a/1")
    assert (why == "") if not refused else (refused in why), why
