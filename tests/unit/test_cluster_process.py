"""The local cluster's processes are stopped by PID, also from a later invocation (`quickstart.py
down`), and never by a PID that now belongs to another program."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.cluster.process import Component
from tests.support.wait import until

SLEEP = shutil.which("sleep")


def test_a_later_invocation_stops_the_process_by_its_pid_file(tmp_path):
    first = Component("sleeper", [SLEEP, "600"], tmp_path / "sleeper.log")
    first.start()
    pid = first.proc.pid
    later = Component("sleeper", [SLEEP, "600"], tmp_path / "sleeper.log")  # what `down` builds anew
    # Right after the fork the child is still Python, not yet `sleep`: until then it is not ours.
    assert until(later.pid, 5, "sleep to be exec'd") == pid and later.alive()
    later.stop(grace=5)
    assert first.proc.wait(timeout=1) == -15  # ended by SIGTERM; reaped here, as its parent
    assert not later.pidfile.exists()


def test_a_recycled_pid_running_another_program_is_left_alone(tmp_path):
    stale = Component("sleeper", [SLEEP, "600"], tmp_path / "sleeper.log")
    stale.pidfile.write_text(str(os.getpid()))  # this test's own process: not `sleep`
    assert stale.pid() is None and not stale.alive()
    stale.stop(grace=1)
    time.sleep(0.1)
    assert Path(f"/proc/{os.getpid()}").exists()


def test_a_second_local_node_is_refused_naming_the_first(tmp_path, monkeypatch):
    from tests.cluster.node import HostState, NodeError

    owner = tmp_path / "owner"
    owner.write_text("/var/lib/soperator/local/host\n")
    monkeypatch.setattr(HostState, "OWNER", owner)
    with pytest.raises(NodeError, match="another local node runs from /var/lib/soperator/local"):
        HostState(tmp_path / "second").prepare()
    assert not (tmp_path / "second").exists()  # nothing recorded, no address added


def test_the_mark_of_a_node_whose_directory_is_gone_is_cleared(tmp_path, monkeypatch):
    from tests.cluster.local import LocalCluster
    from tests.cluster.node import HostState

    owner = tmp_path / "owner"
    owner.write_text(str(tmp_path / "killed-session" / "host"))
    monkeypatch.setattr(HostState, "OWNER", owner)
    LocalCluster(tmp_path / "new")._reclaim_stale_owner()
    assert not owner.exists()
