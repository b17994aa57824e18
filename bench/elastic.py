"""Elastic node sets against a real slurmctld + slurmrestd (one run; counts, ratios and medians):
`python -m bench.elastic [--records 1,100] [--rounds 3]`.

1. What one operator pass costs Slurm with an autoscaling node set of N power-saving records: the
   node list, the planner, the power requests it makes. First pass and a quiet one (nothing changed:
   no body); the operator makes one pass per resync (60 s by default), so REST calls per minute are
   these times the passes a minute. And the demand loop's quiet look (every 5 s by default), which
   runs a pass early when a record starts powering up.
2. From zero, a job's way to RUNNING on the smallest set, against the same job on a worker that is
   already up (in the same run): submit -> Slurm powers a record up (the operator's cue), then the
   node's slurmd started -> the job RUNNING. The pod's own start on a kubelet (image present: the
   entrypoint, then slurmd) and the operator's wait for its demand look (at most 5 s by default) come
   on top; they are not here.
3. Idle -> released: the passes the planner takes from the end of the idle time to the pod's release
   (a drain, then the StatefulSet lowered), and the seconds Slurm takes to power the record down.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.node.drains import SCALE_IN
from soperator.reconcile.autoscale import PodStart, plan_autoscale
from soperator.reconcile.demand import poll_demand
from soperator.reconcile.scale_in import plan_scale_in
from soperator.reconcile.slurm_view import workers_of
from soperator.render.configs import POWER_SAVING, controller_host, slurm_files
from soperator.slurm import SlurmRestClient, mint_token
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail

NAME = "bench"
IDLE = 10


def _cluster(records: int):
    return make_cluster(name=NAME, nodeSets=[{"name": "cpu", "replicas": 1},
                                             {"name": "el", "autoscale": {"max": records, "idleSeconds": IDLE}}],
                        partitions=[{"name": "main", "default": True, "nodeSets": ["cpu"]},
                                    {"name": "el", "nodeSets": ["el"]}],
                        slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                                     "extra": {"SchedulerParameters": "batch_sched_delay=0"}})


@contextmanager
def elastic_slurm(records: int):
    cluster = _cluster(records)
    key = generate_jwt_key()
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp:
        work = Path(tmp)
        names = [f"{NAME}-el-{i}" for i in range(records)]
        with SlurmSandbox(work, slurm_files(cluster), controller_host(cluster), generate_munge_key(), names=names,
                          rest=True, jwt_key=key, jail=make_thin_jail(work / "jail"), cloud=True) as box:
            if not box.status["ready"]:
                raise SystemExit(f"sandbox not ready: {box.status}\n{box.log('slurmctld.log')}")
            forwarder = RestForwarder(str(SlurmSandbox.rest_socket(work)))
            try:
                yield cluster, box, SlurmRestClient(forwarder.url, lambda: mint_token(key))
            finally:
                forwarder.close()


def one_pass(cluster, client: SlurmRestClient, live: int, pods: set[str]) -> dict:
    """What a reconcile pass does with Slurm for the autoscaling node set."""
    node_set = cluster.spec.node_sets[1]
    calls, received, cpu = client.calls, client.bytes_received, time.process_time()
    nodes = workers_of(cluster, client.list_nodes())
    started = dict.fromkeys(pods, PodStart(time.time(), ""))
    sizing = plan_autoscale(f"{NAME}-el", node_set.autoscale, live, started, nodes, time.time())
    scale = plan_scale_in(f"{NAME}-el", sizing.replicas, live, nodes)
    for node in sizing.power_up:
        client.power_up(node)
    for node in sizing.power_down:
        client.power_down(node)
    for node in scale.drain:
        client.drain(node, f"{SCALE_IN} of node set el")
    return {"rest_calls": client.calls - calls, "bytes": client.bytes_received - received,
            "cpu_ms": round((time.process_time() - cpu) * 1000, 2), "replicas": scale.replicas, "sizing": sizing}


def pass_cost(records: list[int]) -> list[dict]:
    rows = []
    for n in records:
        with elastic_slurm(n) as (cluster, _, client):
            time.sleep(1.1)  # a quiet cluster: its last change older than the second of the list
            first, quiet = one_pass(cluster, client, 0, set()), one_pass(cluster, client, 0, set())
            calls, received = client.calls, client.bytes_received
            poll_demand([(("bench", NAME), client)], {}, lambda *_: None)  # the demand loop's look, quiet
            rows.append({"records": n, "rest_calls": first["rest_calls"], "bytes": first["bytes"],
                         "cpu_ms": first["cpu_ms"], "quiet_rest_calls": quiet["rest_calls"],
                         "quiet_bytes": quiet["bytes"], "demand_look_rest_calls": client.calls - calls,
                         "demand_look_bytes": client.bytes_received - received,
                         "powered_down": first["sizing"].powered_down})
    return rows


def _until(check, timeout: float = 120, step: float = 0.1) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise SystemExit("timed out")
        time.sleep(step)
    return time.monotonic() - start


def _state(box: SlurmSandbox, node: str) -> str:
    """As scontrol writes it (IDLE+CLOUD+POWERED_DOWN); sinfo abbreviates power states to a suffix."""
    shown = box.run("scontrol", "-o", "show", "node", node).stdout
    return shown.split(" State=", 1)[1].split()[0] if " State=" in shown else ""


def _job_running(box: SlurmSandbox, job: str) -> bool:
    return "JobState=RUNNING" in box.run("scontrol", "-o", "show", "job", job).stdout


def from_zero(rounds: int) -> dict:
    node = f"{NAME}-el-0"
    powering, registering, warm, release_passes, power_down = [], [], [], [], []
    with elastic_slurm(1) as (cluster, box, client):
        for _ in range(rounds):
            job = box.run("sbatch", "--parsable", "-p", "el", "-o", "/dev/null", "--wrap", "sleep 2").stdout.strip()
            powering.append(_until(lambda: "POWERING_UP" in _state(box, node)))
            start = time.monotonic()
            box.start_cloud_slurmd(node)
            _until(lambda: _job_running(box, job))
            registering.append(time.monotonic() - start)
            box.wait_job(job)
            # The same job on the worker now up: the warm path.
            job = box.run("sbatch", "--parsable", "-p", "el", "-o", "/dev/null", "--wrap", "sleep 2").stdout.strip()
            warm.append(_until(lambda: _job_running(box, job)))
            box.wait_job(job)
            time.sleep(IDLE + 0.5)
            passes, live = 0, 1
            while live:
                passes += 1
                live = one_pass(cluster, client, live, {node})["replicas"]
            release_passes.append(passes)
            box.stop_slurmd()
            one_pass(cluster, client, 0, set())  # the pod gone: the record powered down
            power_down.append(_until(lambda: "POWERED_DOWN" in _state(box, node)))
    return {"rounds": rounds, "submit_to_powering_up_s": round(statistics.median(powering), 2),
            "slurmd_start_to_running_s": round(statistics.median(registering), 2),
            "warm_submit_to_running_s": round(statistics.median(warm), 2),
            "cold_over_warm": round((statistics.median(powering) + statistics.median(registering))
                                    / statistics.median(warm), 1),
            "passes_idle_to_released": release_passes, "power_down_s": round(statistics.median(power_down), 1),
            "suspend_timeout_s": POWER_SAVING["suspend_timeout"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="1,100")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = pass_cost([int(n) for n in args.records.split(",")])
    for row in rows:
        print(json.dumps(row))
    base = rows[0]
    for row in rows[1:]:
        print(f"{row['records']} vs {base['records']} records: REST calls {row['rest_calls']}/{base['rest_calls']} "
              f"a pass ({row['quiet_rest_calls']}/{base['quiet_rest_calls']} quiet), bytes "
              f"x{row['bytes'] / max(base['bytes'], 1):.1f}, quiet bytes {row['quiet_bytes']}/{base['quiet_bytes']}")
    print(json.dumps(from_zero(args.rounds)))


if __name__ == "__main__":
    main()
