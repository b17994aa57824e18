"""What the populate hold reads from `scontrol -o show node`: only a drained node Slurm vouches for is quiet."""
from __future__ import annotations

import pytest

from soperator.node.drains import POPULATE_HOLD
from soperator.node.hold import parse_nodes


@pytest.mark.parametrize("state, quiet", [
    ("IDLE+DRAIN", True),
    ("DOWN+DRAIN", True),
    ("IDLE+CLOUD+DRAIN+POWERED_DOWN", True),          # a cloud node with no pod: nothing runs there
    ("IDLE+DRAIN+NOT_RESPONDING+POWERED_DOWN", True),
    ("IDLE", False),                                  # not drained: a job may start any moment
    ("ALLOCATED+DRAIN", False),                       # draining: a job still runs
    ("MIXED+DRAIN", False),
    ("IDLE+COMPLETING+DRAIN", False),                 # a job's processes are still being cleaned up
    ("IDLE+DRAIN+NOT_RESPONDING", False),             # slurmd silent: unknown, never 'drained'
    ("IDLE*+DRAIN", False),
    ("DOWN+DRAIN*", False),
])
def test_only_drained_nodes_slurm_vouches_for_are_quiet(state, quiet):
    (node,) = parse_nodes(f"NodeName=n1 Arch=x86_64 CoresPerSocket=1 State={state} ThreadsPerCore=1 "
                          f"Reason={POPULATE_HOLD} [root@2026-11-24T00:00:00]\n")
    assert node.quiet is quiet


def test_reasons_with_spaces_and_lines_without_nodes():
    text = ("NodeName=a State=IDLE+DRAIN Reason=disk failing [admin@2026-01-01T00:00:00]\n"
            "No nodes in the system\n"
            f"NodeName=b State=IDLE+DRAIN Reason={POPULATE_HOLD} [root@2026-01-01T00:00:00]\n")
    a, b = parse_nodes(text)
    assert (a.name, a.drained_by_us, b.name, b.drained_by_us) == ("a", False, "b", True)
