"""The health check's verdict as a table: the node as slurmctld has it and the program's result in,
the scontrol update out. The real slurmd and slurmctld prove it (tests/e2e/test_health_check_e2e.py)."""
from __future__ import annotations

import pytest

from soperator.node.drains import HEALTH_CHECK
from soperator.node.fresh_boot import Record
from soperator.node.health_check import decision, reason

OURS = f"{HEALTH_CHECK}: gpu 3: xid 79"


def _node(*state: str, why: str = "") -> Record:
    return Record("w-0", state, why, "")


@pytest.mark.parametrize("node, code, output, update", [
    (_node("IDLE"), 0, "", []),
    (_node("IDLE"), 1, "checking\ngpu 3: xid 79\n\n", ["State=DRAIN", f"Reason={OURS}"]),
    (_node("ALLOCATED"), 1, "gpu 3: xid 79", ["State=DRAIN", f"Reason={OURS}"]),  # drained: its job runs on
    (_node("IDLE", "DRAIN", why=OURS), 1, "gpu 3: xid 79", []),  # already, for this reason
    (_node("IDLE", "DRAIN", why=OURS), 1, "disk full", ["State=DRAIN", f"Reason={HEALTH_CHECK}: disk full"]),
    (_node("IDLE", "DRAIN", why=OURS), 0, "", ["State=RESUME"]),
    (_node("IDLE", "DRAIN", why="admin: bad dimm"), 1, "gpu 3: xid 79", []),  # never replaced
    (_node("IDLE", "DRAIN", why="admin: bad dimm"), 0, "", []),  # never undone
    (_node("IDLE", "DRAIN", why="site-health: disk"), 0, "", []),  # the program's own drain
])
def test_a_failure_drains_and_a_pass_undoes_only_the_checks_own_drain(node, code, output, update):
    assert decision(node, code, output) == ([f"NodeName={node.name}", *update] if update else [])


def test_the_reason_is_the_last_line_else_how_it_ended():
    assert reason(2, "") == f"{HEALTH_CHECK}: exit code 2"
    assert reason(-9, "") == f"{HEALTH_CHECK}: killed by signal 9"
    assert len(reason(1, "x" * 1000)) == 256
