"""The operator at 100, 1,000 (or more) workers on the scale rig (tests/support/scale_rig.py): real
apiserver, controllers and scheduler, KWOK nodes, a real slurmctld and slurmrestd with one record
per worker. `python -m bench.scale_rig [--sizes 100,1000]`; one fresh rig per size, one run each.

Per size: scale-out 0 -> N until every pod Running and every record IDLE; an idle pass (operator CPU
and wall seconds, API calls by verb, REST calls and bytes after a quiet second); the writes of one
Slurm state change; a drain-first scale-in of half the workers; a pod-template rollout of the rest at
maxUnavailable 10 %; slurmctld's and slurmrestd's memory and the time of sinfo and squeue.
"""
from __future__ import annotations

import argparse
import json
import resource
import time
from collections import Counter

from soperator.kube import tally
from tests.support.scale_rig import Rig, scale_rig


def _rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _calls(rig: Rig, before: Counter) -> dict:
    calls = Counter(rig.kube.calls) - before
    reads, writes = tally(calls)
    return {"reads": reads, "writes": writes, "by_verb": dict(sorted(Counter(v for v, _ in calls.elements()).items()))}


def _phase(rig: Rig, done, what: str, timeout: float = 1800) -> dict:
    before, began, cpu = Counter(rig.kube.calls), time.monotonic(), time.process_time()
    passes = rig.converge(done, timeout, what)
    return {"seconds": round(time.monotonic() - began, 1), "passes": passes,
            "bench_cpu_s": round(time.process_time() - cpu, 2), **_calls(rig, before)}


def idle_pass(rig: Rig) -> dict:
    time.sleep(1.1)  # slurmctld answers "unchanged" only for a list older than its last change's second
    before, rest, received = Counter(rig.kube.calls), rig.rest.calls, rig.rest.bytes_received
    cached = Counter(rig.kube.cached)
    cpu, wall = time.process_time(), time.monotonic()
    rig.reconcile()
    return {"cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.monotonic() - wall, 3),
            **_calls(rig, before), "from_watch": dict(Counter(rig.kube.cached) - cached),
            "rest_calls": rig.rest.calls - rest, "rest_bytes": rig.rest.bytes_received - received}


def state_change_writes(rig: Rig) -> dict:
    """One node drained by hand: what the next pass writes (its pod's condition, the status)."""
    node = sorted(rig.records)[0]
    rig.slurm("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=bench")
    time.sleep(1.1)
    before = Counter(rig.kube.calls)
    rig.reconcile()
    out = _calls(rig, before)
    rig.slurm("scontrol", "update", f"NodeName={node}", "State=RESUME")
    rig.reconcile()
    return out


def rollout(rig: Rig, workers: int, max_unavailable: int) -> dict:
    """Every worker on a new pod template, at most `max_unavailable` out of service at a time (the
    largest seen, at each pass, is reported)."""
    old = rig.revision()
    rig.apply(workers, sharedMemorySize="128Mi", maxUnavailable=max_unavailable)
    worst = [0]

    def done() -> bool:
        out = workers - rig.slurm_states().get("idle", 0)
        worst[0] = max(worst[0], out)
        return out == 0 and rig.revision() not in (None, old)
    result = _phase(rig, done, "rollout")
    return {**result, "max_out_of_service": worst[0], "max_unavailable": max_unavailable}


def slurm_side(rig: Rig) -> dict:
    out = {}
    for daemon in ("slurmctld", "slurmrestd"):
        out[f"{daemon}_rss_mib"] = round(sum(int(v) for v in rig.slurm("ps", "-o", "rss=", "-C", daemon).split()) / 1024, 1)
    for argv in (("sinfo", "-N"), ("squeue",)):
        began = time.monotonic()
        rig.slurm(*argv)
        out[f"{argv[0]}_s"] = round(time.monotonic() - began, 3)
    return out


def measure(size: int, watch: bool) -> dict:
    began = time.monotonic()
    with scale_rig(size + 1, watch=watch) as rig:
        row = {"workers": size, "watch": watch, "rig_up_s": round(time.monotonic() - began, 1)}
        rig.start(size)
        row["scale_out"] = _phase(rig, lambda: len(rig.records) == size and rig.slurm_states().get("idle") == size,
                                  "scale-out")
        row["idle_pass"] = idle_pass(rig)
        row["idle_pass_again"] = idle_pass(rig)
        row["state_change"] = state_change_writes(rig)
        row["slurm"] = slurm_side(rig)
        half = size // 2
        rig.apply(half)
        row["scale_in"] = _phase(rig, lambda: len(rig.pods()) == half and len(rig.records) == half, "scale-in")
        row["rollout"] = rollout(rig, half, max(1, half // 10))
        row["operator_rss_mib"] = round(_rss_mib(), 1)
        row["operator_max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return row


QUIET = 15  # seconds without a pass that end a phase
SCRAPE_SECONDS = 5


def _figures(samples: dict) -> dict:
    """The running operator's counters that the phases compare."""
    def total(name: str, **match) -> float:
        return sum(v for (n, labels), v in samples.items()
                   if n == name and all(dict(labels).get(k) == w for k, w in match.items()))
    out = {"passes": total("soperator_reconcile_total"), "coalesced": total("soperator_reconcile_coalesced_total"),
           "pass_seconds": total("soperator_reconcile_seconds_total"), "cpu_s": total("process_cpu_seconds_total"),
           "rss_mib": total("process_resident_memory_bytes") / 2**20}
    for verb in ("get", "list", "apply", "create", "patch", "delete"):
        out[verb] = total("soperator_kube_requests_total", verb=verb)
    return out


def _running_phase(rig: Rig, op, act, done, what: str, timeout: float = 1800) -> dict:
    """`act()`, then wait until `done()` with the records following the pods, then until the operator
    has run no pass for QUIET seconds (its tail of condition writes is the phase's too): the
    operator's own counters' deltas, and the seconds until `done()`."""
    before, began = _figures(op.metrics()), time.monotonic()
    act()
    reached, scraped = None, began
    quiet = (before["passes"], time.monotonic())
    while True:
        now = time.monotonic()
        if now - began > timeout:
            raise AssertionError(f"{what}: not reached in {timeout} s")
        rig.sync_records()
        if reached is None and done():
            reached = now - began
        # Seldom: a scrape of the operator reads its clusters' Slurm state too, and costs it CPU.
        if now - scraped >= SCRAPE_SECONDS:
            scraped, passes = now, _figures(op.metrics())["passes"]
            if passes != quiet[0]:
                quiet = (passes, now)
            elif reached is not None and now - quiet[1] >= QUIET:
                break
        time.sleep(0.5)
    after = _figures(op.metrics())
    delta = {k: round(after[k] - before[k], 2) for k in after if k != "rss_mib"}
    return {"seconds": round(reached, 1), **delta, "rss_mib": round(after["rss_mib"], 1)}


def measure_running(size: int) -> dict:
    """The same cluster, with `soperator run` acting on its own events (passes, coalescing, watches)."""
    from tests.kube.test_reconcile import _finish_job
    from tests.support.wait import until

    with scale_rig(size + 1) as rig:
        rig.apply(size)
        rig.own_jwt_secret()
        with rig.operator() as op:
            until(lambda: rig.reader.get("batch/v1", "Job", "rig", "rig-populate-jail"), 120, "the populate Job")
            row = {"workers": size, "operator": "soperator run"}
            row["scale_out"] = _running_phase(
                rig, op, lambda: _finish_job(rig.kubectl, "rig", "rig-populate-jail"),
                lambda: len(rig.records) == size and rig.slurm_states().get("idle") == size, "scale-out")
            row["idle_60s"] = _running_phase(rig, op, lambda: None, _after(60), "idle")
            half = size // 2
            row["scale_in"] = _running_phase(rig, op, lambda: rig.apply(half), lambda: len(rig.pods()) == half and
                                             len(rig.records) == half and rig.slurm_states().get("idle") == half,
                                             "scale-in")
            old = rig.revision()
            row["rollout"] = _running_phase(
                rig, op, lambda: rig.apply(half, sharedMemorySize="128Mi", maxUnavailable=max(1, half // 10)),
                lambda: _rolled(rig, half, old), "rollout")
    return row


def _after(seconds: float):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end


def _rolled(rig: Rig, workers: int, old: str | None) -> bool:
    return rig.revision() not in (None, old) and rig.slurm_states().get("idle") == workers and \
        len(rig.records) == workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--no-watch", action="store_true", help="list pods and nodes every pass (before kube_watch)")
    parser.add_argument("--running", action="store_true", help="`soperator run` acting on its own events")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        print(json.dumps(measure_running(size) if args.running else measure(size, not args.no_watch)), flush=True)


if __name__ == "__main__":
    main()
