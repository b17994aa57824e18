"""One status poll of the operator against the real slurmctld + slurmrestd (one run; counts and
ratios): `python -m bench.slurm_status [--sizes 10,1000,5000]`.

For each size N the cluster holds N Slurm nodes (one registered slurmd, the rest dynamic FUTURE
records of the same node set) and N worker pods as the apiserver lists them. A poll is what a
reconcile does with Slurm: one list call, the counts per node set, the pod conditions that differ.
Reported: REST calls (must stay 1), bytes received, operator CPU time, and the writes it would make,
on the first poll (everything new) and on a second one with nothing changed (writes must be 0; its
bytes are the quiet poll's: slurmctld answers an unchanged list as of `update_time` with no body).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.node.layout import NODE_SET_LABEL
from soperator.reconcile.slurm_view import slurm_state_counts, pod_condition_changes, workers_of
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from soperator.slurm import SlurmRestClient, mint_token
from soperator.slurm.ctld_metrics import SlurmMetricsClient
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox

NAME = "bench"


def _pods(n: int) -> list[dict]:
    return [{"metadata": {"name": f"{NAME}-cpu-{i}", "namespace": "hpc", "labels": {NODE_SET_LABEL: "cpu"}},
             "status": {"conditions": []}} for i in range(n)]


def poll(client: SlurmRestClient, cluster, pods: list[dict]) -> dict:
    calls, received = client.calls, client.bytes_received
    cpu = time.process_time()
    nodes = workers_of(cluster, client.list_nodes())
    counts = {s.name: slurm_state_counts(s, pods, nodes) for s in cluster.spec.node_sets}
    changes = pod_condition_changes(pods, nodes, "2026-01-01T00:00:00Z")
    cpu_ms = (time.process_time() - cpu) * 1000
    for pod, condition in changes:  # what the apiserver would then hold
        pod["status"]["conditions"] = [condition]
    return {"rest_calls": client.calls - calls, "bytes": client.bytes_received - received,
            "cpu_ms": round(cpu_ms, 1), "pod_condition_writes": len(changes), "counts": counts}


def bench_cluster(size: int):
    return make_cluster(name=NAME, nodeSets=[{"name": "cpu", "replicas": size}],
                        slurmConfig={"maxNodeCount": 65535, "proctrackType": "proctrack/linuxproc",
                                     "taskPlugin": "task/none"})


@contextmanager
def growing_slurm(cluster):
    """A real slurmctld + slurmrestd with one registered slurmd: yields (REST client, grow, client of
    slurmctld's metrics), where grow(n) adds FUTURE records of node set cpu until Slurm holds n nodes."""
    key = generate_jwt_key()
    with tempfile.TemporaryDirectory(prefix="slurm-bench-") as tmp:
        work = Path(tmp)
        registered = f"{NAME}-cpu-0"
        with SlurmSandbox(work, slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                          names=[registered], slurmd=registered, rest=True, jwt_key=key,
                          node_conf=worker_node_conf(cluster.spec.node_sets[0])) as box:
            if not box.status["ready"]:
                raise SystemExit(f"sandbox not ready: {box.status}\n{box.log('slurmctld.log')}")
            forwarder = RestForwarder(str(SlurmSandbox.rest_socket(work)))
            ctld_forwarder = RestForwarder(str(SlurmSandbox.ctld_socket(work)))
            have = [1]

            def grow(size: int) -> None:
                if size > have[0]:
                    box.run("scontrol", "create", f"NodeName={NAME}-cpu-[{have[0]}-{size - 1}]", "State=FUTURE",
                            "Feature=cpu", "CPUs=1", "RealMemory=1024")
                    have[0] = size
            token = lambda: mint_token(key)  # noqa: E731
            try:
                yield SlurmRestClient(forwarder.url, token), grow, SlurmMetricsClient(ctld_forwarder.url, token)
            finally:
                forwarder.close()
                ctld_forwarder.close()


def measure(sizes: list[int]) -> list[dict]:
    cluster = bench_cluster(max(sizes))
    results = []
    with growing_slurm(cluster) as (client, grow, _):
        for size in sorted(sizes):
            grow(size)
            pods = _pods(size)
            # slurmctld counts times in seconds and answers "changed" for a change in the same second
            # as the list it compares with: a quiet cluster is one whose last change is older.
            time.sleep(1.1)
            first, second = poll(client, cluster, pods), poll(client, cluster, pods)
            # The status is written when the counts differ from the stored ones (the first poll's).
            results.append({"nodes": size, "rest_calls": first["rest_calls"], "bytes": first["bytes"],
                            "cpu_ms": first["cpu_ms"],
                            "status_writes_second_poll": int(second["counts"] != first["counts"]),
                            "pod_condition_writes_first_poll": first["pod_condition_writes"],
                            "pod_condition_writes_second_poll": second["pod_condition_writes"],
                            "second_poll_rest_calls": second["rest_calls"], "quiet_poll_bytes": second["bytes"],
                            "counts": first["counts"]})
    return results


def run_sizes(doc: str, measure, ratios: tuple[str, ...], calls: str = "rest_calls") -> None:
    """`--sizes` from the command line into `measure(sizes)`; print each row, then each bigger size's
    REST calls (the row's `calls`) and `ratios` against the smallest."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,1000,5000")
    rows = measure([int(s) for s in parser.parse_args().sizes.split(",")])
    for row in rows:
        print(json.dumps(row))
    base = rows[0]
    for row in rows[1:]:
        print(f"{row['nodes']} vs {base['nodes']} nodes: calls {row[calls]}/{base[calls]}, " + ", ".join(
            f"{key} x{row[key] / max(base[key], 0.1):.1f}" for key in ratios))


def main() -> None:
    run_sizes(__doc__, measure, ("bytes", "cpu_ms"))


if __name__ == "__main__":
    main()
