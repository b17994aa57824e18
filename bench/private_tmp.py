"""What a job's private /tmp and /dev/shm cost at its start: `python -m bench.private_tmp [--jobs N]`.

Two real Slurm nodes of the node image (tests/support/slurm.py), each with a thin jail: one with the
plugin's line as soperator renders it (job_tmp=, job_shm=: each job's directories made, bound in
as its steps enter the jail, removed by its epilog), one with those options taken off (the jail's
/tmp and /dev/shm, shared by every job). Each round runs one `srun true` job on each, alternately,
so both see the same machine; prints the median wall time of each and their ratio, and the jobs'
directories left on the node afterwards (a count: 0 expected).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from images.build import build_all
from soperator.keys import generate_munge_key
from soperator.node.layout import PATHS
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.conftest import make_cluster
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail

NODE = "demo-worker-0"
OPTIONS = f" job_tmp={PATHS.job_tmp} job_shm={PATHS.job_shm}"


def sandbox(work: Path, private: bool) -> SlurmSandbox:
    cluster = make_cluster(nodeSets=[{"name": "worker", "replicas": 1}], slurmConfig={
        "proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    files = slurm_files(cluster)
    assert OPTIONS in files["plugstack.conf"]
    if not private:
        files["plugstack.conf"] = files["plugstack.conf"].replace(OPTIONS, "")
    box = SlurmSandbox(work / "box", files, controller_host(cluster), generate_munge_key(), names=[NODE],
                       slurmd=NODE, jail=make_thin_jail(work / "jail"),
                       node_conf=worker_node_conf(cluster.spec.node_sets[0]))
    if not box.status["ready"]:
        raise SystemExit(f"sandbox not ready: {box.status}")
    return box


def one_job(box: SlurmSandbox) -> float:
    started = time.monotonic()
    proc = box.run("srun", "-w", NODE, "--chdir=/", "true")
    if proc.returncode != 0:
        raise SystemExit(f"srun failed: {proc.stderr}\n{box.slurmd_log()}")
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30, help="jobs on each node (default 30)")
    args = parser.parse_args(argv)
    build_all(only=["node"])
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="soperator-private-tmp-") as tmp, ExitStack() as stack:
        boxes = {private: stack.enter_context(sandbox(Path(tmp) / str(private), private)) for private in (True, False)}
        for box in boxes.values():
            one_job(box)  # warm: the first step loads what later ones find cached
        for _ in range(args.jobs):
            for private, box in boxes.items():
                times[private].append(one_job(box))
        time.sleep(2)  # the last epilog
        left = boxes[True].run("find", PATHS.job_tmp, PATHS.job_shm, "-mindepth", "1").stdout.split()
    with_dirs, without = statistics.median(times[True]), statistics.median(times[False])
    print(f"srun true, {args.jobs} jobs each, median: private /tmp and /dev/shm {with_dirs * 1000:.0f} ms, "
          f"shared {without * 1000:.0f} ms, ratio {with_dirs / without:.2f}; job directories left: {len(left)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
