"""The node containers' supervisor reaps orphans: they would otherwise stay zombies, each one counted
against its user's process limit (slurmstepd daemonizes for every job step)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support_paths import ROOT

SUPERVISED = """
from soperator.node.supervise import Supervisor
sup = Supervisor()
sup.start("daemon", ["sh", "-c", "for i in 1 2 3 4 5; do (sleep 0.1 &); done; sleep 3; exit 7"])
raise SystemExit(sup.wait())
"""


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, state letter) of each direct child of pid."""
    out = []
    for child in (Path(f"/proc/{pid}/task/{pid}/children").read_text().split()):
        stat = Path(f"/proc/{child}/stat").read_text()
        out.append((int(child), stat[stat.rindex(")") + 2]))
    return out


def test_orphans_are_reaped_and_the_daemons_exit_code_kept():
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISED], cwd=ROOT)
    try:
        time.sleep(1.5)  # the sleeps are orphaned to the supervisor and exited long ago
        children = _children(proc.pid)
        # Only the daemon's shell is left; five orphaned sleeps came and went without a trace.
        assert len(children) == 1 and children[0][1] != "Z", children
        assert proc.wait(timeout=20) == 7
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


PERIODIC = """
import subprocess
from soperator.node.supervise import Supervisor
sup = Supervisor()
codes = []
sup.every(0.1, lambda: codes.append(subprocess.run(["sh", "-c", "exit 3"]).returncode))
sup.start("daemon", ["sh", "-c", "sleep 2; exit 7"])
code = sup.wait()
print(code, len(codes), sorted(set(codes)))
"""


def test_periodic_work_runs_in_the_loop_and_keeps_its_childrens_exit_codes():
    """Work that starts processes runs between reaps, so reap() never takes its child's status
    (a thread would race it: subprocess then reports 0 for a child it could not wait for)."""
    out = subprocess.run([sys.executable, "-c", PERIODIC], cwd=ROOT, capture_output=True, text=True,
                         timeout=30).stdout.split()
    assert out[0] == "7" and int(out[1]) >= 2 and out[2:] == ["[3]"], out


FOLLOWED = """
import sys, time
from soperator.node.supervise import Supervisor
sup = Supervisor()
sup.follow("daemon-log", sys.argv[1])
time.sleep(0.5)
with open(sys.argv[1], "a") as log:
    log.write("fatal: the reason it stopped\\n")
sup.stop()  # at once, as when the daemon has just exited
"""


def test_a_daemons_last_log_line_reaches_the_pod_log_before_the_follower_stops(tmp_path):
    """Found on the real kubelet: slurmd wrote why it failed to its log file and exited at once, and
    the pod's log showed only the exit code: the follower was stopped before it read the line."""
    log = tmp_path / "daemon.log"
    proc = subprocess.run([sys.executable, "-c", FOLLOWED, str(log)], cwd=ROOT, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0
    assert "fatal: the reason it stopped" in proc.stdout, proc.stdout + proc.stderr


RESTARTED = """
import sys
from soperator.node.supervise import Supervisor
sup = Supervisor()
# The helper appends a line each time it starts, and dies at once; the node's daemon lives until the
# helper has started three times.
sup.start_restartable("helper", ["sh", "-c", "echo started >> " + sys.argv[1] + "; exit 5"])
sup.start("daemon", ["sh", "-c", "until [ $(cat " + sys.argv[1] + " 2>/dev/null | wc -l) -ge 3 ]; do sleep 0.1; done; exit 7"])
raise SystemExit(sup.wait())
"""


def test_a_restartable_helper_that_dies_is_started_again_and_never_stops_the_node(tmp_path):
    """The image cache's daemon: its exit stops no node (and so no job); it starts again after a pause
    that doubles (1, then 2 s...), and the node still stops with its daemon, with the daemon's code."""
    starts = tmp_path / "starts"
    proc = subprocess.run([sys.executable, "-c", RESTARTED, str(starts)], cwd=ROOT, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 7, proc.stderr
    assert starts.read_text().split()[:3] == ["started"] * 3, proc.stderr
    assert "helper exited with 5; starting it again in 1 s" in proc.stderr
    assert "helper exited with 5; starting it again in 2 s" in proc.stderr
