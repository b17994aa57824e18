"""spec.healthCheck on real slurmctld and slurmd containers: the program is a path in the jail, run
there by slurmd's HealthCheckProgram as root confined as a job step (not on the node's root), and it
can do what a site's health check does: drain its node with a reason. Its exit code is its verdict:
a failure drains the node with its last line, a pass undoes only that drain."""
from __future__ import annotations

import re

import pytest

from images.podman import podman
from soperator.node.drains import HEALTH_CHECK
from tests.support.e2e_cluster import running
from tests.support.wait import until

pytestmark = pytest.mark.e2e
CAP_SYS_ADMIN = 21
# A site's check, as NHC would be: it reports where it runs, and drains its node while the jail has
# /etc/site-unhealthy. /opt/soperator/soperator_node is on the node images only, never in the jail.
SITE_HEALTH = """#!/bin/sh
{ head -n1 /etc/soperator-jail-release
  test -e /opt/soperator/soperator_node && echo node-root || echo jail-root
  grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr '\\n' ' '; echo
  id -u
  echo "$SLURMD_NODENAME"; } > /var/tmp/health.$$ && mv /var/tmp/health.$$ /var/tmp/health-report
if [ -e /etc/site-unhealthy ]; then
  scontrol update nodename="$SLURMD_NODENAME" state=drain reason="site-health: $(cat /etc/site-unhealthy)"
fi
echo run >> /var/tmp/health-runs
if [ -e /etc/site-failing ]; then
  echo "checking gpus"; echo "gpu 3: $(cat /etc/site-failing)"; exit 1
fi
"""


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path, nodeSets=[{"name": "worker", "replicas": 1}],
                       healthCheck={"program": "/usr/local/sbin/site-health", "interval": 5})


def test_the_health_check_runs_in_the_jail_and_can_drain_its_node(cluster):
    assert cluster.populate("first")["action"] == "populated"
    program = cluster.jail / "usr" / "local" / "sbin" / "site-health"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text(SITE_HEALTH)
    program.chmod(0o755)
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    cluster.start("e2e-worker-0", cluster.pod("StatefulSet", "e2e-worker"))

    def ctl(*argv: str) -> str:
        return podman("exec", "e2e-controller-0", *argv, check=False).stdout

    report = cluster.jail / "var" / "tmp" / "health-report"
    until(report.exists, 120, "the health check to run")
    release, where, status, uid, node = report.read_text().splitlines()
    assert release.startswith("soperator jail") and where == "jail-root", report.read_text()
    fields = dict(zip(status.split()[::2], status.split()[1::2]))
    for name in ("CapPrm:", "CapEff:", "CapBnd:"):  # root, confined as a job step's task
        assert not int(fields[name], 16) & (1 << CAP_SYS_ADMIN), status
    assert fields["NoNewPrivs:"] == "1" and fields["Seccomp:"] == "2", status
    assert (uid, node) == ("0", "e2e-worker-0")
    assert re.search(r"HealthCheckProgram\s+= /opt/soperator/bin/health-check\n", ctl("scontrol", "show", "config"))

    runs = cluster.jail / "var" / "tmp" / "health-runs"

    def two_more_runs():
        seen = len(runs.read_text().splitlines())
        return lambda: len(runs.read_text().splitlines()) >= seen + 2

    def idle() -> bool:
        return ctl("sinfo", "-h", "-N", "-o", "%t", "-n", "e2e-worker-0").strip() == "idle"

    # The program drains its node itself (and exits 0): a drain the wrapper never undoes.
    (cluster.jail / "etc" / "site-unhealthy").write_text("disk")
    until(lambda: "Reason=site-health: disk" in ctl("scontrol", "show", "node", "e2e-worker-0"), 60,
          "the health check to drain its node")
    assert "DRAIN" in ctl("sinfo", "-h", "-N", "-o", "%T", "-n", "e2e-worker-0").upper()
    (cluster.jail / "etc" / "site-unhealthy").unlink()
    until(two_more_runs(), 60, "two more runs of the check, passing")
    assert "Reason=site-health: disk" in ctl("scontrol", "show", "node", "e2e-worker-0")
    ctl("scontrol", "update", "nodename=e2e-worker-0", "state=resume")
    until(idle, 60, "idle again")

    # A failing check (exit 1) drains its node, its last line the reason; passing again, it resumes it.
    (cluster.jail / "etc" / "site-failing").write_text("xid 79")
    until(lambda: f"Reason={HEALTH_CHECK}: gpu 3: xid 79" in ctl("scontrol", "show", "node", "e2e-worker-0"), 60,
          "the failing check to drain its node")
    (cluster.jail / "etc" / "site-failing").unlink()
    until(idle, 60, "the passing check to resume its node")
    step = ctl("srun", "-N1", "--chdir=/tmp", "cat", "/etc/soperator-jail-release")
    assert step.startswith("soperator jail")


@pytest.fixture
def gpu_checked(images, tmp_path):
    yield from running(tmp_path, nodeSets=[{"name": "worker", "replicas": 1}],
                       healthCheck={"program": "/usr/lib/soperator/checks/gpu-health", "interval": 5})


def test_the_jails_gpu_check_drains_a_node_without_a_gpu_driver_naming_it(gpu_checked):
    """The GPU check the jail image ships, run as the node's check in the real jail: this machine has no
    NVIDIA driver, so the node is drained saying so (a node with GPUs runs its queries; not here)."""
    cluster = gpu_checked
    assert cluster.populate("first")["action"] == "populated"
    assert (cluster.jail / "usr" / "lib" / "soperator" / "checks" / "gpu-health").stat().st_mode & 0o111
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    cluster.start("e2e-worker-0", cluster.pod("StatefulSet", "e2e-worker"))
    reason = f"Reason={HEALTH_CHECK}: no NVIDIA driver in the jail: nvidia-smi not found"
    until(lambda: reason in podman("exec", "e2e-controller-0", "scontrol", "show", "node", "e2e-worker-0",
                                   check=False).stdout, 120, "the GPU check to drain its node")
