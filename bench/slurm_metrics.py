"""One scrape of the operator's Slurm metrics against the real slurmctld + slurmrestd (one run;
counts and ratios): `python -m bench.slurm_metrics [--sizes 10,1000,5000]`.

For each size N, Slurm holds N nodes (one registered slurmd, the rest FUTURE records), as in
bench/slurm_status.py. A scrape is what Prometheus gets from /metrics for the cluster: REST calls
(must not grow with N), bytes received from slurmrestd, bytes of exposition served, wall and CPU time.
"""
from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, generate_latest

from bench.slurm_status import NAME, bench_cluster, growing_slurm, run_sizes
from soperator.render.configs import placeholder_node_name
from soperator.metrics.slurm import SlurmCollector, Target


def measure(sizes: list[int]) -> list[dict]:
    cluster = bench_cluster(max(sizes))
    rows = []
    with growing_slurm(cluster) as (client, grow):
        collector = SlurmCollector()
        collector.track(Target("bench", NAME, client, ("cpu",),
                               frozenset(placeholder_node_name(cluster, n) for n in cluster.spec.node_sets)))
        registry = CollectorRegistry()
        registry.register(collector)
        for size in sorted(sizes):
            grow(size)
            calls, received = client.calls, client.bytes_received
            wall, cpu = time.monotonic(), time.process_time()
            served = generate_latest(registry)
            rows.append({"nodes": size, "rest_calls": client.calls - calls,
                         "bytes_from_slurmrestd": client.bytes_received - received, "bytes_served": len(served),
                         "wall_ms": round((time.monotonic() - wall) * 1000, 1),
                         "cpu_ms": round((time.process_time() - cpu) * 1000, 1)})
    return rows


def main() -> None:
    run_sizes(__doc__, measure, ("wall_ms", "cpu_ms"))


if __name__ == "__main__":
    main()
