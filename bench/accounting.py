"""slurmdbd's throughput on real MariaDB (one run; counts and ratios):
`python -m bench.accounting [--jobs 1000]`.

A burst of N trivial jobs (`true`, one array) in the accounting box of tests/support/accounting.py,
measured twice:
- live: slurmdbd up throughout; the records' lag is the time from the last job's end in slurmctld to
  its record in sacct;
- backlog: slurmdbd stopped while the N jobs run, so slurmctld queues every record; then started,
  and timed until sacct holds all N ended: records per second that slurmdbd and MariaDB take in.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from soperator.node.layout import PORTS
from tests.support.accounting import accounted_box
from tests.support.wait import until

NAME = "bench"


def _run(box, *argv: str, timeout: float = 120) -> str:
    proc = box.run(*argv, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc.stdout


def _burst(box, n: int) -> tuple[str, float]:
    """Submit N tasks, wait until slurmctld has ended them all; (array job id, seconds to run them)."""
    start = time.monotonic()
    job = _run(box, "sbatch", "--parsable", f"--array=1-{n}", "-o", "/dev/null", "--wrap", "true").strip()
    until(lambda: not _run(box, "squeue", "-h", "-j", job, "-o", "%i").strip(), 1800, "the burst to end", 1)
    return job, time.monotonic() - start


def _recorded(box, job: str) -> int:
    proc = box.run("sacct", "-n", "-X", "-P", "-j", job, "-o", "State", timeout=120)
    return proc.stdout.split().count("COMPLETED") if proc.returncode == 0 else 0


def measure(n: int) -> dict:
    # The main scheduler every second: by default a task that ends while its node is still completing
    # leaves the next ones pending until a pass up to sched_interval (60 s) later (measured: 1 job/s).
    extra = {"SchedulerParameters": "batch_sched_delay=0,sched_interval=1,bf_interval=1",
             "MaxArraySize": str(n + 1)}
    with tempfile.TemporaryDirectory(prefix="acct-bench-") as tmp, accounted_box(Path(tmp), NAME, extra,
                                                                                 cpus=2) as box:
        job, ran = _burst(box, n)
        ended = time.monotonic()
        until(lambda: _recorded(box, job) == n, 600, "the live records", 0.2)
        live = time.monotonic() - ended

        _run(box, "pkill", "-x", "slurmdbd")
        until(lambda: f":{PORTS.slurmdbd} " not in _run(box, "ss", "-ltn"), 60, "slurmdbd to stop", 0.2)
        queued_job, _ = _burst(box, n)
        _run(box, "sh", "-c", f"slurmdbd -D >>{box.work}/slurmdbd.log 2>&1 </dev/null &")
        started = time.monotonic()
        until(lambda: _recorded(box, queued_job) == n, 900, "the queued records", 0.5)
        drained = time.monotonic() - started
        return {"jobs": n, "burst_run_s": round(ran, 1), "live_record_lag_s": round(live, 2),
                "backlog_drain_s": round(drained, 1), "jobs_recorded_per_s": round(n / drained, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    print(json.dumps(measure(parser.parse_args().jobs), indent=2))


if __name__ == "__main__":
    main()
