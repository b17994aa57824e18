"""What a new worker container reads from slurmctld's record of its node before slurmd starts: does it
still count jobs there (they died with the previous container), and whose drain is it."""
from __future__ import annotations

import pytest

from soperator.node.fresh_boot import REASON, Record


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
])
def test_a_node_is_busy_while_slurmctld_counts_jobs_on_it(state, busy):
    assert _record(state).busy is busy


def test_the_reason_is_read_whole_and_other_nodes_are_not_taken_for_this_one():
    node = _record(["MIXED", "DRAIN"], "admin: bad fan", "uid/1")
    assert (node.reason, node.instance_id) == ("admin: bad fan", "uid/1")
    assert Record.parse({"nodes": [{"name": "w-1", "state": ["IDLE"]}]}, "w-0") is None
    assert REASON.startswith("soperator:")
