"""A worker container's death: how long until Slurm ends its job as a node failure, and until the node
is back in service. Measured on the e2e's real containers (slurmctld and slurmd 24.11), one run.

  python -m bench.worker_death [--rounds 5]

One worker runs a batch job (`--no-requeue`, so its end is NODE_FAIL at once rather than a requeue
that waits out the launch credential). Then, in turn, each way a container dies:
  - slurmd:   slurmd killed (-9) inside the container; the container exits and is started again;
  - main:     the container's main process killed (-9) from the host, as an OOM kill does; started again;
  - replaced: the container removed by force and a new one started under the name (a pod deleted
              by force, its StatefulSet's new pod).
The restart follows the death at once, as a kubelet's first restart and a StatefulSet's replacement do.
Times are from the kill: the job's NODE_FAIL, and the node idle again. Polled every 0.2 s.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from images.build import build_all
from images.podman import podman
from tests.support.e2e_cluster import running
from tests.support.wait import until

WORKER = "e2e-worker-0"
KINDS = ("slurmd", "main", "replaced")


def _ctl(*argv: str) -> str:
    return podman("exec", "e2e-controller-0", *argv, check=False).stdout


def _kill(cluster, kind: str) -> None:
    if kind == "slurmd":
        podman("exec", WORKER, "sh", "-c", "kill -9 $(cat /run/slurmd.pid)")
    elif kind == "main":
        os.kill(int(podman("inspect", "--format", "{{.State.Pid}}", WORKER).stdout), signal.SIGKILL)
    if kind == "replaced":
        podman("rm", "-f", "-t", "0", WORKER)
        cluster.start(WORKER, cluster.pod("StatefulSet", "e2e-worker"))
    else:
        podman("wait", WORKER, timeout=60)
        podman("start", WORKER)


def _round(cluster, kind: str) -> tuple[float, float]:
    job = _ctl("sbatch", "--parsable", "--no-requeue", "-w", WORKER, "-o", "/dev/null", "--wrap", "sleep 600").strip()
    until(lambda: "JobState=RUNNING" in _ctl("scontrol", "-o", "show", "job", job), 60, "the job to run")
    killed = time.monotonic()
    _kill(cluster, kind)
    until(lambda: "JobState=NODE_FAIL" in _ctl("scontrol", "-o", "show", "job", job), 600, "NODE_FAIL", 0.2)
    failed = time.monotonic() - killed
    until(lambda: _ctl("sinfo", "-h", "-n", WORKER, "-o", "%t").strip() == "idle", 600, "the node idle", 0.2)
    return failed, time.monotonic() - killed


def measure(cluster, rounds: int) -> dict:
    runs: dict[str, dict[str, list[float]]] = {k: {"node_fail_s": [], "idle_again_s": []} for k in KINDS}
    for _ in range(rounds):
        for kind in KINDS:  # interleaved, so the machine's drift touches every kind alike
            failed, idle = _round(cluster, kind)
            runs[kind]["node_fail_s"].append(round(failed, 2))
            runs[kind]["idle_again_s"].append(round(idle, 2))
    return {kind: {f"median_{k}": round(statistics.median(v), 2) for k, v in r.items()} | r
            for kind, r in runs.items()} | {"rounds": rounds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    build_all()
    with tempfile.TemporaryDirectory(prefix="soperator-bench-") as tmp:
        with contextlib.contextmanager(running)(Path(tmp), nodeSets=[{"name": "worker", "replicas": 1}]) as cluster:
            cluster.populate("bench")
            cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
            cluster.start(WORKER, cluster.pod("StatefulSet", "e2e-worker"))
            until(lambda: _ctl("sinfo", "-h", "-o", "%t").strip() == "idle", 120, "the worker")
            result = measure(cluster, args.rounds)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
