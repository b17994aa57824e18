"""Render time and output size against the worker count (issue: render must not scale with workers).

Usage: python -m bench.render_bench [--repeat N]. Prints one row per worker count; the ratios
against the 1-worker row are the figures to compare (absolute times depend on the machine).
"""
from __future__ import annotations

import argparse
import statistics
import time

from soperator.api import parse_cluster
from soperator.keys import generate_munge_key, generate_ssh_host_keys
from soperator.render import KeyMaterial, render_all
from soperator.yamlio import dump_all

COUNTS = (1, 100, 5000)


def _cluster(workers: int):
    return parse_cluster({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                          "metadata": {"name": "bench"}, "spec": {"nodeSets": [{"name": "gpu", "replicas": workers, "gpus": 8}]}})


def measure(workers: int, keys: KeyMaterial, repeat: int) -> tuple[float, float, int]:
    cluster = _cluster(workers)
    render_ms, total_ms = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        objects = render_all(cluster, keys)
        t1 = time.perf_counter()
        text = dump_all(objects)
        t2 = time.perf_counter()
        render_ms.append((t1 - t0) * 1e3)
        total_ms.append((t2 - t0) * 1e3)
    return statistics.median(render_ms), statistics.median(total_ms), len(text.encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    keys = KeyMaterial(generate_munge_key(), generate_ssh_host_keys())
    rows = [(n, *measure(n, keys, args.repeat)) for n in COUNTS]
    base = rows[0]
    print(f"{'workers':>8} {'render ms':>10} {'+yaml ms':>9} {'bytes':>8} {'time x1':>8} {'size x1':>8}")
    for n, render_ms, total_ms, size in rows:
        print(f"{n:>8} {render_ms:>10.2f} {total_ms:>9.2f} {size:>8} {render_ms / base[1]:>8.2f} "
              f"{size / base[3]:>8.4f}")


if __name__ == "__main__":
    main()
