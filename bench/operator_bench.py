"""Operator figures on the real control plane: `python -m bench.operator_bench [--clusters 50]`.

- CR apply → Secrets, ConfigMaps and the populate Job exist; Job success → StatefulSets exist;
- write calls of a no-op reconcile;
- operator RSS with N SlurmClusters.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

from bench.crd_plane import crd_plane
from soperator.reconcile import reconcile
from tests.kube.test_operator import Operator
from tests.kube.test_reconcile import _finish_job, _names

API = "slurm.soperator.dev/v1alpha1"


def _wait(predicate, timeout=120) -> float:
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > timeout:
            raise SystemExit("timed out")
        time.sleep(0.02)
    return time.perf_counter() - started


def _manifest(name: str) -> str:
    return yaml.safe_dump({"apiVersion": API, "kind": "SlurmCluster", "metadata": {"name": name, "namespace": "bench"}})


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clusters", type=int, default=50)
    args = parser.parse_args()
    with crd_plane("bench") as (plane, kubectl, kube, work):
        op = Operator(plane, work, "bench")
        try:
            time.sleep(3)  # operator start-up, not part of the figure
            t0 = time.perf_counter()
            kubectl("apply", "-f", "-", input=_manifest("first"))
            _wait(lambda: _names(kube, "bench", "Job", "batch/v1") == ["first-populate-jail"]
                  and len(_names(kube, "bench", "Secret")) == 2)
            first = time.perf_counter() - t0
            _finish_job(kubectl, "bench", "first-populate-jail")
            nodes = _wait(lambda: len(_names(kube, "bench", "StatefulSet", "apps/v1")) == 3)
            print(f"CR apply -> Secrets+ConfigMaps+Job: {first:.2f} s; Job success -> 3 StatefulSets: {nodes:.2f} s")
            for _ in range(3):
                reconcile(kube, kube.get(API, "SlurmCluster", "bench", "first"))
            before = kube.writes
            reconcile(kube, kube.get(API, "SlurmCluster", "bench", "first"))
            print(f"write calls in a no-op reconcile: {kube.writes - before}")
            rss0 = _rss_mib(op.proc.pid)
            for i in range(args.clusters - 1):
                kubectl("apply", "-f", "-", input=_manifest(f"c{i}"))
            _wait(lambda: len(_names(kube, "bench", "Job", "batch/v1")) == args.clusters, timeout=600)
            time.sleep(5)  # a couple of resync passes over all clusters
            print(f"operator RSS: {rss0:.0f} MiB with 1 cluster, {_rss_mib(op.proc.pid):.0f} MiB with "
                  f"{args.clusters} clusters")
        finally:
            op.stop()


if __name__ == "__main__":
    sys.exit(main())
