"""Kubernetes API calls of one idle reconcile pass, by number of node sets: `python -m bench.api_calls`.

A real kube-apiserver (no kubelet: the controller never gets ready, so Slurm is not asked and the pass
reads only Kubernetes). Each cluster is created, its populate Job finished through the status
subresource, and converged; then one more pass is counted. Idle means nothing to write, so the
figure is the reads a quiet cluster costs every resync.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter

import yaml

from bench.crd_plane import crd_plane
from soperator.kube import Kube, tally
from soperator.reconcile import reconcile
from tests.kube.conftest import Kubectl
from tests.kube.test_reconcile import _finish_job

API = "slurm.soperator.dev/v1alpha1"
NAMESPACE = "bench"


def _cluster(name: str, node_sets: int) -> str:
    spec = {"nodeSets": [{"name": f"ns{i}", "replicas": 1} for i in range(node_sets)]}
    return yaml.safe_dump({"apiVersion": API, "kind": "SlurmCluster",
                           "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec})


def idle_pass(kube: Kube, kubectl: Kubectl, node_sets: int) -> Counter:
    """The calls of one pass over a converged cluster with this many node sets."""
    name = f"c{node_sets}"
    kubectl("apply", "-f", "-", input=_cluster(name, node_sets))
    body = lambda: kube.get(API, "SlurmCluster", NAMESPACE, name)  # noqa: E731
    reconcile(kube, body())
    _finish_job(kubectl, NAMESPACE, f"{name}-populate-jail")
    for _ in range(3):
        reconcile(kube, body())
    current = body()
    before = Counter(kube.calls)
    reconcile(kube, current)
    return Counter(kube.calls) - before


def _row(node_sets: int, calls: Counter) -> str:
    reads, writes = tally(calls)
    detail = ", ".join(f"{verb} {kind} {n}" for (verb, kind), n in sorted(calls.items()))
    return f"{node_sets:>9} {reads:>6} {writes:>7}   {detail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node-sets", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()
    with crd_plane(NAMESPACE) as (_, kubectl, kube, _):
        print("node sets  reads  writes   calls")
        for n in args.node_sets:
            print(_row(n, idle_pass(kube, kubectl, n)))


if __name__ == "__main__":
    sys.exit(main())
