"""One scrape of Slurm's metrics against the real slurmctld + slurmrestd, Slurm's own OpenMetrics
against the REST reads the operator built its Slurm series from before (one run; counts and ratios):
`python -m bench.slurm_metrics [--sizes 10,1000,5000]`.

For each size N, Slurm holds N nodes (one registered slurmd, the rest FUTURE records) and no job, as
in bench/slurm_status.py. Measured at each size, one after the other:
- rest_*: what the REST-built series read per scrape: the node list in full, the job list and
  sdiag's statistics (GET /nodes, /jobs, /diag), bytes and wall time, the lists parsed as the client
  parses them;
- om_*: slurmctld's four metric sets (jobs, nodes, partitions, scheduler), bytes and wall time, parsed;
- scrape_*: the operator's whole scrape as Prometheus gets it now (the node list kept as of its last
  answer, the four sets, the exposition): REST calls, metric GETs, bytes served, wall and CPU time.
"""
from __future__ import annotations

import time

import urllib3
from prometheus_client import CollectorRegistry, generate_latest

from bench.slurm_status import NAME, bench_cluster, growing_slurm, run_sizes
from soperator.metrics.slurm import SlurmCollector, Target
from soperator.render.configs import placeholder_node_name
from soperator.slurm import SlurmRestClient
from soperator.slurm.client import API, TOKEN_HEADER


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 1)


def rest_reads(client: SlurmRestClient) -> tuple[int, float]:
    """(bytes, ms) of the three reads, a fresh client each time: no node list kept from before."""
    fresh = SlurmRestClient(client.base_url, client.token, retries=0)
    started = time.monotonic()
    fresh.list_nodes(), fresh.list_jobs()
    diag = urllib3.request("GET", fresh.base_url + API + "/diag", headers={TOKEN_HEADER: client.token()})
    return fresh.bytes_received + len(diag.data), _ms(started)


def measure(sizes: list[int]) -> list[dict]:
    cluster = bench_cluster(max(sizes))
    rows = []
    with growing_slurm(cluster) as (client, grow, ctld):
        collector = SlurmCollector()
        collector.track(Target("bench", NAME, client, ctld, ("cpu",),
                               frozenset(placeholder_node_name(cluster, n) for n in cluster.spec.node_sets)))
        registry = CollectorRegistry()
        registry.register(collector)
        for size in sorted(sizes):
            grow(size)
            time.sleep(1.1)  # a quiet cluster: its last change older than a second (see slurm_status)
            client.list_nodes()  # the kept list, as the reconcile passes leave it
            rest_bytes, rest_ms = rest_reads(client)
            got, started = ctld.bytes_received, time.monotonic()
            ctld.scrape_all()
            om_bytes, om_ms = ctld.bytes_received - got, _ms(started)
            calls, gets = client.calls, ctld.calls
            wall, cpu = time.monotonic(), time.process_time()
            served = generate_latest(registry)
            rows.append({"nodes": size, "rest_bytes": rest_bytes, "rest_ms": rest_ms, "om_bytes": om_bytes,
                         "om_ms": om_ms, "scrape_rest_calls": client.calls - calls, "scrape_metric_gets": ctld.calls - gets,
                         "scrape_bytes_served": len(served), "scrape_wall_ms": _ms(wall),
                         "scrape_cpu_ms": round((time.process_time() - cpu) * 1000, 1)})
    return rows


def main() -> None:
    run_sizes(__doc__, measure, ("rest_bytes", "om_bytes", "scrape_bytes_served", "scrape_wall_ms"),
              calls="scrape_rest_calls")


if __name__ == "__main__":
    main()
