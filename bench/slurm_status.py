"""One status poll of the operator against the real slurmctld + slurmrestd (one run; counts and
ratios): `python -m bench.slurm_status [--sizes 10,1000,5000]`.

For each size N the cluster holds N Slurm nodes (one registered slurmd, the rest dynamic FUTURE
records of the same node set) and N worker pods as the apiserver lists them. A poll is what a
reconcile does with Slurm: one list call, the counts per node set, the pod conditions that differ.
Reported: REST calls (must stay 1), bytes received, operator CPU time, and the writes it would make,
on the first poll (everything new) and on a second one with nothing changed (must be 0).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.reconcile.slurm_nodes import node_set_counts, pod_condition_changes
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from soperator.render.nodes import NODE_SET_LABEL
from soperator.slurm import SlurmRestClient, mint_token
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
    nodes = {n.name: n for n in client.list_nodes()}
    counts = {s.name: node_set_counts(s, pods, nodes) for s in cluster.spec.node_sets}
    changes = pod_condition_changes(pods, nodes, "2026-01-01T00:00:00Z")
    cpu_ms = (time.process_time() - cpu) * 1000
    for pod, condition in changes:  # what the apiserver would then hold
        pod["status"]["conditions"] = [condition]
    return {"rest_calls": client.calls - calls, "bytes": client.bytes_received - received,
            "cpu_ms": round(cpu_ms, 1), "pod_condition_writes": len(changes), "counts": counts}


def measure(sizes: list[int]) -> list[dict]:
    cluster = make_cluster(name=NAME, nodeSets=[{"name": "cpu", "replicas": max(sizes)}],
                           slurmConfig={"maxNodeCount": 65536, "proctrackType": "proctrack/linuxproc",
                                        "taskPlugin": "task/none"})
    key = generate_jwt_key()
    results = []
    with tempfile.TemporaryDirectory(prefix="slurm-status-") as tmp:
        work = Path(tmp)
        registered = f"{NAME}-cpu-0"
        with SlurmSandbox(work, slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                          names=[registered], slurmd=registered, rest=True, jwt_key=key,
                          node_conf=worker_node_conf(cluster.spec.node_sets[0])) as box:
            if not box.status["ready"]:
                raise SystemExit(f"sandbox not ready: {box.status}\n{box.log('slurmctld.log')}")
            forwarder = RestForwarder(str(SlurmSandbox.rest_socket(work)))
            client = SlurmRestClient(forwarder.url, lambda: mint_token(key))
            have = 1
            try:
                for size in sorted(sizes):
                    if size > have:
                        box.run("scontrol", "create", f"NodeName={NAME}-cpu-[{have}-{size - 1}]", "State=FUTURE",
                                "Feature=cpu", "CPUs=1", "RealMemory=1024")
                        have = size
                    pods = _pods(size)
                    first, second = poll(client, cluster, pods), poll(client, cluster, pods)
                    # The status is written when the counts differ from the stored ones (the first poll's).
                    results.append({"nodes": size, "rest_calls": first["rest_calls"], "bytes": first["bytes"],
                                    "cpu_ms": first["cpu_ms"],
                                    "status_writes_second_poll": int(second["counts"] != first["counts"]),
                                    "pod_condition_writes_first_poll": first["pod_condition_writes"],
                                    "pod_condition_writes_second_poll": second["pod_condition_writes"],
                                    "second_poll_rest_calls": second["rest_calls"], "counts": first["counts"]})
            finally:
                forwarder.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,1000,5000")
    args = parser.parse_args()
    results = measure([int(s) for s in args.sizes.split(",")])
    for row in results:
        print(json.dumps(row))
    base = results[0]
    for row in results[1:]:
        print(f"{row['nodes']} vs {base['nodes']} nodes: calls {row['rest_calls']}/{base['rest_calls']}, "
              f"bytes x{row['bytes'] / base['bytes']:.0f}, cpu x{row['cpu_ms'] / max(base['cpu_ms'], 0.1):.0f}")


if __name__ == "__main__":
    main()
