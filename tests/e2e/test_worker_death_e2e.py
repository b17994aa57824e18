"""A worker container that dies takes its jobs with it, and Slurm is told so: real slurmctld and
slurmd 26.05 in containers from our images, configured by `soperator render`.

Three workers, each running a requeueable batch job (a step of its own inside) and an interactive
`srun` job, die three ways at once: slurmd killed (the container exits and is started again, as a
kubelet restarts it), the container's main process killed from the host (an OOM kill), and the
pod deleted by force and replaced by a new one under the same name. For each: both jobs leave
RUNNING as node failures, the batch job is requeued and runs again to completion, the srun caller
hears of the failure, no job stays RUNNING on a node that does not run it, and the node is back in
service (the third one drained, as its admin left it). Workers started before their controller wait for
its name first."""
from __future__ import annotations

import os
import re
import signal

import pytest

from images.podman import podman
from tests.support.e2e_cluster import running
from tests.support.wait import until

pytestmark = pytest.mark.e2e
WORKERS = ("e2e-worker-0", "e2e-worker-1", "e2e-worker-2")
# A batch job and an srun job share a worker: a core and a little memory each (CR_Core_Memory).
MEM = "--mem=64M"


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path, nodeSets=[{"name": "worker", "replicas": 3, "cpus": 2}])


def _ctl(*argv: str) -> str:
    return podman("exec", "e2e-controller-0", *argv, check=False).stdout


def _job(job: str) -> dict[str, str]:
    shown = _ctl("scontrol", "-o", "show", "job", job)
    return dict(re.findall(r"(JobState|Restarts|NodeList|ExitCode)=(\S+)", shown))


def _node_state(node: str) -> str:
    return _ctl("sinfo", "-h", "-n", node, "-o", "%t").strip()


def _start_jobs(worker: str) -> tuple[str, str]:
    """(a requeueable batch job that runs a step, an interactive srun job), both RUNNING on `worker`.
    The batch job writes into the shared jail, appending: each run says it started, the last one that
    it is done."""
    script = ("echo start-${SLURM_RESTART_COUNT:-0}; srun --overlap sleep $((SLURM_RESTART_COUNT ? 1 : 600)); "
              "echo done-$SLURM_RESTART_COUNT")
    batch = _ctl("sbatch", "--parsable", "--requeue", MEM, "-w", worker, "--open-mode=append",
                 "-o", f"/root/{worker}.out", "--wrap", script).strip()
    assert batch
    # srun runs in the controller container, in the background; its exit code is written when it ends.
    podman("exec", "-d", "e2e-controller-0", "sh", "-c",
           f"srun -J interactive-{worker} {MEM} -w {worker} sleep 600 >/tmp/srun-{worker}.log 2>&1; "
           f"echo $? > /tmp/srun-{worker}.rc")
    interactive = until(lambda: _ctl("squeue", "-h", "-n", f"interactive-{worker}", "-t", "R", "-o", "%i").strip(),
                        60, f"the srun job on {worker} to run")
    until(lambda: _job(batch).get("JobState") == "RUNNING", 60, f"the batch job on {worker} to run")
    until(lambda: f"{batch}.0" in _ctl("squeue", "-h", "-s", "-j", batch, "-o", "%i").split(), 60, f"{batch}'s step")
    return batch, interactive


def test_a_dead_worker_container_fails_its_jobs_requeues_batch_jobs_and_returns(cluster):
    assert cluster.populate("first")["action"] == "populated"
    worker = cluster.pod("StatefulSet", "e2e-worker")
    # Workers started before their controller wait until its name resolves, saying so, then register.
    for name in WORKERS:
        cluster.start(name, worker)
    until(lambda: "waiting for e2e-controller-0 to resolve" in podman("logs", WORKERS[0]).stderr, 60,
          "the worker to wait for the controller's name")
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    until(lambda: _ctl("sinfo", "-h", "-o", "%t %D").split() == ["idle", "3"], 120, "three workers to register")
    assert "e2e-controller-0 resolves" in podman("logs", WORKERS[0]).stderr
    # Like a kubelet's pod (dnsPolicy ClusterFirst), a node's one resolver is the cluster's DNS.
    resolv = podman("exec", WORKERS[0], "cat", "/etc/resolv.conf").stdout
    assert [line.split()[1] for line in resolv.splitlines() if line.startswith("nameserver")] == [
        cluster.dns.address], resolv
    jobs = {name: _start_jobs(name) for name in WORKERS}
    # An admin drains the third worker while its jobs run; the drain must outlive the container.
    _ctl("scontrol", "update", "NodeName=e2e-worker-2", "State=DRAIN", "Reason=admin: bad fan")

    # 0: slurmd killed: the supervisor ends the container, which a kubelet starts again.
    podman("exec", WORKERS[0], "sh", "-c", "kill -9 $(cat /run/slurmd.pid)")
    # 1: the container's main process killed from the node (what an OOM kill of it does).
    os.kill(int(podman("inspect", "--format", "{{.State.Pid}}", WORKERS[1]).stdout), signal.SIGKILL)
    # 2: the pod deleted by force; its StatefulSet makes a new one under the same name.
    podman("rm", "-f", "-t", "0", WORKERS[2])
    for name in WORKERS[:2]:
        podman("wait", name, timeout=60)
        podman("start", name)
    cluster.start(WORKERS[2], worker)

    for name, (batch, interactive) in jobs.items():
        # The interactive job is a node failure; srun hears of it and exits non-zero.
        until(lambda: _job(interactive).get("JobState") == "NODE_FAIL", 90, f"{interactive} on {name} to fail")
        code = until(lambda: _ctl("cat", f"/tmp/srun-{name}.rc").strip(), 60, f"srun on {name} to exit")
        assert code != "0", _ctl("cat", f"/tmp/srun-{name}.log")
        # The batch job left RUNNING: requeued (Restarts=1) to wait for its node, not left on a dead one.
        until(lambda: _job(batch).get("Restarts") == "1", 90, f"{batch} on {name} to be requeued")
        assert _job(batch)["JobState"] in ("PENDING", "RUNNING", "COMPLETED"), _job(batch)
    for name in WORKERS:
        log = podman("logs", name).stderr
        assert f"node {name} was " in log and "set DOWN, its jobs end as node failures" in log, log[-3000:]

    # The third node came back drained, with its admin's reason; the admin resumes it.
    until(lambda: _node_state(WORKERS[2]) == "drain", 120, "the drained node back, still drained")
    assert "Reason=admin: bad fan" in _ctl("scontrol", "show", "node", WORKERS[2])
    _ctl("scontrol", "update", f"NodeName={WORKERS[2]}", "State=RESUME")
    # Requeued jobs start again once the old launch credential has expired (2 minutes).
    for name, (batch, _) in jobs.items():
        until(lambda: _job(batch).get("JobState") == "COMPLETED", 300, f"{batch} to run again and complete")
        assert _job(batch)["ExitCode"] == "0:0"
        assert (cluster.jail / "root" / f"{name}.out").read_text().split() == ["start-0", "start-1", "done-1"]
    assert _ctl("squeue", "-h", "-t", "R", "-o", "%i %N").strip() == ""
    until(lambda: [_node_state(n) for n in WORKERS] == ["idle"] * 3, 120, "every node idle again")
    # The new pod took the record over (its InstanceId); going away gracefully, it deletes it.
    uid = podman("exec", WORKERS[2], "printenv", "SOPERATOR_POD_UID").stdout.strip()
    assert f"InstanceId={uid}/" in _ctl("scontrol", "show", "node", WORKERS[2])
    podman("stop", "-t", "30", WORKERS[2])
    until(lambda: WORKERS[2] not in _ctl("sinfo", "-h", "-N", "-o", "%N").split(), 60, "its record to go")
