"""What a user namespace costs a job step: `python -m bench.userns_steps [--steps N]`.

The quick start on this host with two node sets: `worker` (the node's user namespace) and `userns`
(`hostUsers: false`), without Slurm's cgroup plugins (this host mounts cgroup v1, where a
user-namespaced worker cannot confine another user's tasks). From the login node, N rounds of `srun -w <worker> true` on each, the two
interleaved so that the machine's noise falls on both alike, each timed there; prints both medians and
their ratio, in one run. Takes about ten minutes; stops and purges what it started.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import paramiko

from bench.cgroup_steps import QUICKSTART, step_times
from tests.cluster.node import NODE_IP
from tests.support.ssh_session import Login
from tests.support.wait import until
from tests.support_paths import ROOT

STATE = Path("/var/lib/soperator/bench-userns-steps")
NAME = "hpc"
WORKERS = {"node's user namespace": f"{NAME}-worker-0", "own user namespace": f"{NAME}-userns-0"}
VALUES = {"spec": {"slurmConfig": {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/affinity"},
                   "nodeSets": [{"name": "worker", "replicas": 1, "cpus": 2},
                                {"name": "userns", "replicas": 1, "cpus": 2, "hostUsers": False}]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15, help="rounds of one step on each worker")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        values = Path(work) / "values.json"
        values.write_text(json.dumps(VALUES))
        up = subprocess.run([*QUICKSTART, "up", "--state-dir", str(STATE), "--values", str(values), "--skip-ssh",
                             "--timeout", "1200"], cwd=ROOT)
    times: dict[str, list[float]] = {kind: [] for kind in WORKERS}
    try:
        if up.returncode != 0:
            raise SystemExit("the quick start failed")
        port = int(subprocess.run(
            [str(Path.home() / ".cache" / "soperator" / "bin" / "kubectl"), "-n", "slurm", "get", "service",
             f"{NAME}-login", "-o", "jsonpath={.spec.ports[0].nodePort}"], check=True, capture_output=True, text=True,
            env={**os.environ, "KUBECONFIG": str(STATE / "plane" / "admin.kubeconfig")}).stdout)  # HOME: its cache
        login = Login(NODE_IP, port, paramiko.Ed25519Key.from_private_key_file(str(STATE / "id_ed25519")), timeout=600)
        until(lambda: login.run("sinfo -h -o %t").split() == ["idle"], 600, "both workers idle")
        for worker in WORKERS.values():
            step_times(login, worker, 2)  # warm
        for _ in range(args.steps):
            for kind, worker in WORKERS.items():
                times[kind] += step_times(login, worker, 1)
        login.close()
    finally:
        subprocess.run([*QUICKSTART, "down", "--state-dir", str(STATE), "--purge"], cwd=ROOT)
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    own, node = medians["own user namespace"], medians["node's user namespace"]
    print(f"srun true, median of {args.steps}: in the node's user namespace {node * 1000:.0f} ms, "
          f"in its own {own * 1000:.0f} ms, ratio {own / node:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
