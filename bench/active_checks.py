"""An active health check's round on the real Slurm: `python -m bench.active_checks [--rounds N]`.

One slurmctld, slurmrestd and slurmd of the node image with the jail plugin and a thin jail
(tests/support/slurm.py), the check a program in the jail. Each round, alternately passing and
failing, does what reconcile passes do, one pass a second: plan (reconcile/checks.py), submit the
round's job through the operator's REST client, read its end back, drain on failure. Prints the
median seconds from the round's start to its verdict (and, failing, to the node drained), and the
REST calls a round took. A failed round's node is resumed before the next.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from images.build import build_all
from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.reconcile.checks import plan_checks
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from soperator.slurm import SlurmRestClient, mint_token
from tests.conftest import make_cluster
from tests.slurm.test_active_checks import NODE, PROBE
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail, reach_slurmctld_from

EVERY = 10


def one_round(client: SlurmRestClient, cluster, status: list[dict], now: float) -> tuple[float, int, list[dict], bool]:
    """Seconds to the verdict (and drain), REST calls, the status after, whether it failed."""
    calls, started = client.calls, time.monotonic()
    while True:
        plan = plan_checks(cluster, {n.name: n for n in client.list_nodes()}, client.list_jobs(), status, now)
        for step in plan.submit:
            plan.status[0]["running"][step.node] = client.submit_job(step.script, step.job)
        for node, reason in plan.drain.items():
            client.drain(node, reason)
        status = plan.status
        if not status[0]["running"] and not plan.submit:
            return time.monotonic() - started, client.calls - calls, status, bool(plan.failures)
        time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    build_all(only=["node"])
    cluster = make_cluster(name="chk", nodeSets=[{"name": "cpu", "replicas": 1}], healthCheck={"active": [
        {"name": "probe", "program": "/opt/checks/probe", "everySeconds": EVERY}]}, slurmConfig={
        "proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    times: dict[bool, list[tuple[float, int]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        jail = make_thin_jail(work / "jail")
        (jail / "opt" / "checks").mkdir(parents=True)
        (jail / "opt" / "checks" / "probe").write_text(PROBE)
        (jail / "opt" / "checks" / "probe").chmod(0o755)
        files, key = slurm_files(cluster), generate_jwt_key()
        with SlurmSandbox(work / "box", files, controller_host(cluster), generate_munge_key(), names=[NODE],
                          slurmd=NODE, node_conf=worker_node_conf(cluster.spec.node_sets[0]), jwt_key=key, rest=True,
                          jail=jail) as box:
            if not box.status["ready"]:
                raise SystemExit(f"sandbox not ready: {box.status}")
            reach_slurmctld_from(jail, box, files["slurm.conf"], controller_host(cluster))
            forwarder = RestForwarder(str(SlurmSandbox.rest_socket(work / "box")))
            try:
                client = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0)
                status: list[dict] = []
                now = time.time()
                for i in range(args.rounds):
                    fail = bool(i % 2)
                    marker = jail / "opt" / "checks" / "fail"
                    if fail:
                        marker.write_text("")
                    else:
                        marker.unlink(missing_ok=True)
                    now += EVERY
                    seconds, calls, status, failed = one_round(client, cluster, status, now)
                    assert failed == fail, (i, status)
                    times[fail].append((seconds, calls))
                    if fail:
                        box.run("scontrol", "update", f"NodeName={NODE}", "State=RESUME")
            finally:
                forwarder.close()
    medians = {fail: statistics.median(s for s, _ in runs) for fail, runs in times.items()}
    for fail, runs in times.items():
        print(f"{'failing: start -> node drained' if fail else 'passing: start -> verdict'}: median "
              f"{medians[fail]:.2f} s of {len(runs)} ({', '.join(f'{s:.2f}' for s, _ in runs)}); REST calls "
              f"{', '.join(str(c) for _, c in runs)}")
    print(f"failing / passing: x{medians[True] / medians[False]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
