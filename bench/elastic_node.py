"""Elastic node sets and `kubectl drain` on the real single-node Kubernetes (tests/cluster/local.py),
with real slurmd pods and the operator in cluster (resync 5 s). One run; report medians, ratios, counts.

  python -m bench.elastic_node [--rounds 3]

- from zero: `sbatch` -> the job RUNNING on a worker the operator starts for it (Slurm's power-up, the
  operator's pass, the pod's start on the kubelet and slurmd's registration, images present), against
  the same job on that worker once up; median of the rounds, and the ratio;
- idle -> released: the last job's end -> the pod gone and the record powered down (idleSeconds 10);
- a worker no node can schedule: `sbatch` -> its record DOWN with the scheduler's words (resumeTimeout 10);
- `kubectl drain` of a worker's Kubernetes node while its job runs: the job's end -> the drain done, and
  the evictions the workers' disruption budget refused before (kubectl retries every 5 s).
Needs the machine to itself: no other local node (test session or `quickstart.py up`) may run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from bench.lifecycle import NAME, Bench, install
from bench.local_node import on_a_local_node
from soperator.node.drains import START_FAILED
from tests.cluster.local import LocalCluster

ELASTIC, STRANDED = f"{NAME}-elastic-0", f"{NAME}-stranded-0"
SPEC = {"nodeSets": [{"name": "worker", "replicas": 2},
                     {"name": "elastic", "autoscale": {"max": 1, "idleSeconds": 10}},
                     {"name": "stranded", "autoscale": {"max": 1, "resumeTimeout": 10},
                      "scheduling": {"nodeSelector": {"soperator.bench/nowhere": "true"}}}],
        "partitions": [{"name": "main", "default": True}, {"name": "elastic", "nodeSets": ["elastic"]},
                       {"name": "stranded", "nodeSets": ["stranded"]}]}


def slurm(b: Bench, *argv: str) -> str:
    return subprocess.run([*b.kubectl, "exec", f"{NAME}-controller-0", "-c", "slurmctld", "--", *argv],
                          check=True, capture_output=True, text=True).stdout


def job_state(b: Bench, job: str) -> str:
    return slurm(b, "scontrol", "-o", "show", "job", job).split("JobState=")[1].split()[0]


def node(b: Bench, name: str, field: str) -> str:
    """'' until slurmctld knows the node (slurm.conf's records arrive with a reconfigure)."""
    lines = slurm(b, "sinfo", "-h", "-N", "-n", name, "-o", field).splitlines()
    return lines[0].strip() if lines else ""


def submit(b: Bench, *argv: str) -> str:
    return slurm(b, "sbatch", "--parsable", "-o", "/dev/null", *argv).strip()


def _to_running(b: Bench, *argv: str) -> tuple[str, float]:
    began = time.monotonic()
    job = submit(b, *argv)
    b.wait(lambda: job_state(b, job) in ("RUNNING", "COMPLETED"), f"job {job} to run")
    return job, time.monotonic() - began


def _round(b: Bench) -> dict:
    b.wait(lambda: node(b, ELASTIC, "%t") == "idle~", "the elastic record powered down")
    job, cold = _to_running(b, "-p", "elastic", "--wrap", "sleep 1")
    b.wait(lambda: job_state(b, job) == "COMPLETED", "the cold job to end")
    job, warm = _to_running(b, "-p", "elastic", "--wrap", "sleep 1")
    b.wait(lambda: job_state(b, job) == "COMPLETED", "the warm job to end")
    released = b.wait(lambda: not b.get("pods", "-l", "slurm.soperator.dev/node-set=elastic")["items"]
                      and node(b, ELASTIC, "%t") == "idle~", "the idle worker released, its record powered down")
    return {"cold": cold, "warm": warm, "released": released}


def _stranded(b: Bench) -> dict:
    began = time.monotonic()
    job = submit(b, "-p", "stranded", "--wrap", "true")
    given_up = b.wait(lambda: node(b, STRANDED, "%E").startswith(START_FAILED), "the stranded worker given up")
    reason = node(b, STRANDED, "%E")
    slurm(b, "scancel", job)
    return {"sbatch -> given up (s)": round(given_up, 1), "started -> given up (s)": round(
        time.monotonic() - began, 1), "reason": reason}


def _kubectl_drain(b: Bench) -> dict:
    worker = f"{NAME}-worker-0"
    host = b.get("pod", worker)["spec"]["nodeName"]
    job, _ = _to_running(b, "-w", worker, "--wrap", "sleep 30")
    drain = subprocess.Popen([*b.kubectl, "drain", host, "--pod-selector",
                              f"statefulset.kubernetes.io/pod-name={worker}", "--delete-emptydir-data",
                              "--ignore-daemonsets", "--timeout=600s"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        b.wait(lambda: job_state(b, job) == "COMPLETED", "the job on the drained node to end")
        ended = time.monotonic()
        output, _ = drain.communicate(timeout=600)
        after = time.monotonic() - ended
    finally:
        subprocess.run([*b.kubectl, "uncordon", host], check=True, capture_output=True)
    b.wait(lambda: node(b, worker, "%t") == "idle", "the evicted worker back in service")
    return {"kubectl drain rc": drain.returncode, "job end -> drain done (s)": round(after, 1),
            "evictions refused while the job ran": output.count("disruption budget")}


def run(cluster: LocalCluster, rounds: int) -> dict:
    b = install(cluster)
    subprocess.run([*b.kubectl, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps({"spec": SPEC})],
                   check=True, capture_output=True)
    done = [_round(b) for _ in range(rounds)]
    cold, warm = (statistics.median(r[k] for r in done) for k in ("cold", "warm"))
    return {"rounds": [{k: round(v, 1) for k, v in r.items()} for r in done],
            "from zero, sbatch -> RUNNING (s, median)": round(cold, 1),
            "worker up, sbatch -> RUNNING (s, median)": round(warm, 2), "cold/warm": round(cold / warm, 1),
            "last job's end -> released (s, median)": round(statistics.median(r["released"] for r in done), 1),
            "unschedulable worker": _stranded(b), "kubectl drain": _kubectl_drain(b)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    print(json.dumps(on_a_local_node(lambda cluster: run(cluster, rounds)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
