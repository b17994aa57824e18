"""An autoscaling node set's worker as its pod runs it: real slurmctld and slurmd 26.05 in containers
from our images, configured by `soperator render`. The test does what the operator does for it
(tests/kube/test_autoscale.py proves the operator's part): it starts the worker's container once Slurm
powered the node up for a job, stops it as a released pod stops, and powers the record down.

The worker's entrypoint takes over a CLOUD record that Slurm is powering up for a job (its jobs wait
for this container: not a dead container's), its slurmd registers under the pod's name from the
container's own address, the job runs in the jail, and the same record is resumed by the next job in
a new container; a rollout's new container takes the drained record over and serves once resumed."""
from __future__ import annotations

import pytest

from images.podman import podman
from soperator.node.drains import UPDATE
from tests.support.e2e_cluster import running
from tests.support.wait import until

pytestmark = pytest.mark.e2e
NODE = "e2e-cpu-0"


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path, nodeSets=[{"name": "cpu", "autoscale": {"max": 2, "idleSeconds": 10}}])


def _ctl(*argv: str) -> str:
    return podman("exec", "e2e-controller-0", *argv, check=False).stdout


def _state(node: str) -> str:
    """As scontrol writes it: IDLE+CLOUD+POWERED_DOWN."""
    shown = _ctl("scontrol", "-o", "show", "node", node)
    return shown.split(" State=", 1)[1].split()[0] if " State=" in shown else ""


def _run_job_on_a_new_worker(cluster, tag: str) -> str:
    """A job from the queue powers NODE up; the worker's container starts as its pod would, and the job
    runs there. Returns the job's output."""
    job = _ctl("sbatch", "--parsable", "-o", f"/root/elastic-{tag}.out", "--wrap",
               "cat /etc/soperator-jail-release; hostname").strip()
    assert job, _ctl("sinfo")
    until(lambda: "POWERING_UP" in _state(NODE), 30, "Slurm to power the node up")
    cluster.start(NODE, cluster.pod("StatefulSet", "e2e-cpu"))
    until(lambda: "JobState=COMPLETED" in _ctl("scontrol", "-o", "show", "job", job), 120,
          f"job {job} to complete on the new worker")
    return (cluster.jail / "root" / f"elastic-{tag}.out").read_text()


def test_a_cloud_record_powered_up_for_a_job_registers_runs_it_and_is_resumed_again(cluster):
    assert cluster.populate("first")["action"] == "populated"
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    until(lambda: "POWERED_DOWN" in _state(NODE), 120, "slurmctld with the node set's powered-down records")

    out = _run_job_on_a_new_worker(cluster, "first")
    assert out.startswith("soperator jail") and out.splitlines()[-1] == NODE, out
    logs = podman("logs", NODE).stderr
    assert f"node {NODE} held no job" in logs, logs  # taken over, not set DOWN for a dead container's jobs

    # Released: the pod stops (no record to delete: it outlives the pod), the operator powers it down.
    podman("stop", "-t", "30", NODE)
    assert "deleted from Slurm" not in podman("logs", NODE).stderr
    podman("rm", NODE)
    cluster.containers.remove(NODE)
    assert f"NodeName={NODE} " in _ctl("scontrol", "-o", "show", "node", NODE)
    _ctl("scontrol", "update", f"NodeName={NODE}", "State=POWER_DOWN")
    until(lambda: _state(NODE) == "IDLE+CLOUD+POWERED_DOWN", 60, "the record to power down")

    # The next job resumes the same record, in a new container.
    out = _run_job_on_a_new_worker(cluster, "second")
    assert out.splitlines()[-1] == NODE, out
    assert _state(NODE) in ("IDLE+CLOUD", "MIXED+CLOUD", "ALLOCATED+CLOUD", "IDLE+CLOUD+COMPLETING"), _state(NODE)

    # A rollout replaces the running worker as the operator does it: drained with its reason, the pod
    # gone once drained, a new one started. Its slurmd (-b: it reports a boot) takes over the record,
    # which is not powering up; Slurm does not call a drained node's boot unexpected, so it stays
    # drained, not DOWN, until the operator's resume, and then runs a job.
    _ctl("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", f"Reason={UPDATE} of node set cpu")
    until(lambda: _state(NODE) == "IDLE+CLOUD+DRAIN", 60, "the worker drained")
    podman("stop", "-t", "30", NODE)
    podman("rm", NODE)
    cluster.containers.remove(NODE)
    cluster.start(NODE, cluster.pod("StatefulSet", "e2e-cpu"))
    until(lambda: f"node {NODE} held no job" in podman("logs", NODE).stderr, 60, "the new worker's take-over")
    until(lambda: _ctl("sinfo", "-h", "-N", "-n", NODE, "-o", "%t").strip() == "drain", 60,
          "the new slurmd registered, the record still drained")
    _ctl("scontrol", "update", f"NodeName={NODE}", "State=RESUME")
    job = _ctl("sbatch", "--parsable", "-w", NODE, "-o", "/root/elastic-rolled.out", "--wrap", "hostname").strip()
    until(lambda: "JobState=COMPLETED" in _ctl("scontrol", "-o", "show", "job", job), 60, "a job on the new worker")
    assert (cluster.jail / "root" / "elastic-rolled.out").read_text().strip() == NODE
