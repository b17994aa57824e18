"""The populate Job's hold and release steps against real slurmctld + slurmd: a repopulate never
cuts a running job short, and resumes only the nodes it drained itself."""
from __future__ import annotations

import re
import time

import pytest

from soperator.node.drains import POPULATE_HOLD
from soperator.node.hold import parse_nodes
from tests.spank.test_slurmd_jail import NODE, _sandbox, _submit

pytestmark = pytest.mark.slurm
# The image's copy of the node package (soperator_node), run by the image's Python.
HOLD = "from soperator_node.hold import hold; hold(poll=0.2)"
RELEASE = "from soperator_node.hold import release; release(poll=0.2)"


def _node(box):
    (node,) = parse_nodes(box.run("scontrol", "-o", "show", "node", NODE).stdout)
    return node


def _until_running(box, job: str) -> None:
    deadline = time.monotonic() + 30
    while "JobState=RUNNING" not in box.run("scontrol", "-o", "show", "job", job).stdout:
        assert time.monotonic() < deadline, box.run("scontrol", "-o", "show", "job", job).stdout
        time.sleep(0.1)


def test_hold_waits_for_the_running_job_and_release_resumes_only_its_own_drain(tmp_path, keys, jail):
    with _sandbox(tmp_path, keys, jail) as box:
        job = _submit(box, "#!/bin/sh\nsleep 3\necho finished\n", "-o", "/home/held-%j.out", "--chdir=/home")
        _until_running(box, job)
        held = box.run("python3", "-c", HOLD, timeout=60)
        assert held.returncode == 0, held.stderr
        # The hold returned only once the job had ended on its own, and logged what it waited for.
        assert box.run("scontrol", "-o", "show", "job", job).stdout.count("JobState=COMPLETED") == 1
        assert re.search(rf"waiting for {NODE} \((ALLOCATED|MIXED)\+\S*DRAIN", held.stderr), held.stderr
        node = _node(box)
        assert (node.base, "DRAIN" in node.flags, node.reason, node.quiet) == ("IDLE", True, POPULATE_HOLD, True)
        # Held: a job submitted now waits.
        waiting = _submit(box, "#!/bin/sh\ntrue\n", "-o", "/home/waiting-%j.out", "--chdir=/home")
        time.sleep(1)
        assert "JobState=PENDING" in box.run("scontrol", "-o", "show", "job", waiting).stdout

        released = box.run("python3", "-c", RELEASE, timeout=60)
        assert released.returncode == 0 and f"released: {NODE}" in released.stderr, released.stderr
        assert "DRAIN" not in _node(box).flags
        assert box.wait_job(waiting)["JobState"] == "COMPLETED"

        # An admin's drain is the admin's: the hold takes the node as it is, the release leaves it.
        box.run("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", "Reason=maintenance")
        assert box.run("python3", "-c", HOLD, timeout=60).returncode == 0
        assert "nothing held" in box.run("python3", "-c", RELEASE, timeout=60).stderr
        node = _node(box)
        assert "DRAIN" in node.flags and node.reason == "maintenance"
    assert (jail / "home" / f"held-{job}.out").read_text() == "finished\n"
