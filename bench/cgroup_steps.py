"""What Slurm's cgroup plugins cost a job step, on each kernel: `python -m bench.cgroup_steps [--steps N]`.

The quick start with `--nodes 2` (a worker on this host, cgroup v1, and one on the VM node, cgroup v2:
tests/cluster/vm_node.py) under the CR's defaults (proctrack/cgroup, task/cgroup,task/affinity); from
the login node, N `srun -w <worker> true` on each worker, each timed there; then the SlurmCluster set
to proctrack/linuxproc and task/affinity (no cgroups: the operator rolls the workers, drained first)
and the same again. Prints each kernel's median with and without, and their ratio, in one run. The VM
is emulated (qemu without KVM): its absolute times are several times a real node's, the ratio is
what to read. Takes about half an hour; stops and purges what it started.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import paramiko

from tests.cluster.node import NODE_IP
from tests.support.ssh_session import Login
from tests.support.wait import until
from tests.support_paths import ROOT

STATE = Path("/var/lib/soperator/bench-cgroup-steps")
QUICKSTART = [sys.executable, str(ROOT / "examples" / "quickstart.py")]
NAMESPACE, NAME = "slurm", "hpc"
WORKERS = {"host (cgroup v1)": f"{NAME}-worker-0", "VM (cgroup v2)": f"{NAME}-emulated-0"}
NO_CGROUPS = {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/affinity"}


def kubectl(*args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(STATE / "plane" / "admin.kubeconfig")}
    binary = Path.home() / ".cache" / "soperator" / "bin" / "kubectl"
    return subprocess.run([str(binary), "-n", NAMESPACE, *args], env=env, check=True, capture_output=True,
                          text=True).stdout


def step_times(login: Login, worker: str, steps: int) -> list[float]:
    """Each `srun true` on `worker`, timed on the login node (ns), as seconds."""
    out = login.run(f"cd /tmp && for i in $(seq {steps}); do s=$(date +%s%N); srun -w {worker} true; "
                    "e=$(date +%s%N); echo $((e - s)); done", timeout=60 * steps)
    return [int(ns) / 1e9 for ns in out.split()]


def workers_without_cgroups() -> bool:
    pods = json.loads(kubectl("get", "pods", "-o", "json"))["items"]
    workers = [p for p in pods if p["metadata"]["name"] in WORKERS.values()]
    env = [{e["name"] for e in p["spec"]["containers"][0].get("env", [])} for p in workers]
    ready = [all(c.get("ready") for c in p["status"].get("containerStatuses", [])) for p in workers]
    return len(workers) == 2 and all(ready) and not any("SOPERATOR_SLURM_CGROUPS" in e for e in env)


def measure(login: Login, steps: int) -> dict[str, float]:
    for worker in WORKERS.values():
        step_times(login, worker, 2)  # warm
    return {kernel: statistics.median(step_times(login, worker, steps)) for kernel, worker in WORKERS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15, help="steps on each worker in each setting")
    args = parser.parse_args(argv)
    up = subprocess.run([*QUICKSTART, "up", "--nodes", "2", "--workers", "1", "--state-dir", str(STATE),
                         "--skip-ssh", "--timeout", "1800"], cwd=ROOT)
    try:
        if up.returncode != 0:
            raise SystemExit("the quick start failed")
        port = int(kubectl("get", "service", f"{NAME}-login", "-o", "jsonpath={.spec.ports[0].nodePort}"))
        login = Login(NODE_IP, port, paramiko.Ed25519Key.from_private_key_file(str(STATE / "id_ed25519")), timeout=600)
        until(lambda: login.run("sinfo -h -o %t").split() == ["idle"], 600, "both workers idle")
        with_cgroups = measure(login, args.steps)
        kubectl("patch", "slurmcluster", NAME, "--type=merge", "-p",
                json.dumps({"spec": {"slurmConfig": NO_CGROUPS}}))
        until(workers_without_cgroups, 1800, "the workers rolled without cgroups", interval=5)
        login.reconnect()
        until(lambda: "proctrack/linuxproc" in login.run("scontrol show config | grep ProctrackType")
              and login.run("sinfo -h -o %t").split() == ["idle"], 600, "both workers idle on linuxproc", interval=3)
        time.sleep(5)
        without = measure(login, args.steps)
        login.close()
    finally:
        subprocess.run([*QUICKSTART, "down", "--nodes", "2", "--state-dir", str(STATE), "--purge"], cwd=ROOT)
    for kernel in WORKERS:
        print(f"{kernel}: srun true, median of {args.steps}: with cgroups {with_cgroups[kernel] * 1000:.0f} ms, "
              f"without {without[kernel] * 1000:.0f} ms, ratio {with_cgroups[kernel] / without[kernel]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
