"""Cost of the jail, as ratios taken in one run (these machines are noisy; absolute times are not).

  python -m bench.jail_bench steps     srun step launch latency, plugin vs no plugin (same daemons)
  python -m bench.jail_bench sbatch    batch throughput, plugin vs no plugin
  python -m bench.jail_bench populate  populate-jail first fill vs tar|tar, and re-run time
  python -m bench.jail_bench all

Plugin and no-plugin runs alternate in rounds on the same slurmctld/slurmd (the node image's Slurm
26.05, in a container whose PID 1 reaps the slurmstepds each step leaves). slurmd is configless, so
each switch of plugstack.conf is a `scontrol reconfigure`, waited for until slurmd's copy has it.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from images.build import image_ref
from images.podman import podman
from soperator.node.populate import populate
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.conftest import make_cluster
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail

NODE = "bench-worker-0"
NO_PLUGIN = "# no plugin: steps run on the node's root\n"


def _sandbox(work: Path) -> tuple[SlurmSandbox, Path, dict[str, str]]:
    cluster = make_cluster(name="bench", nodeSets=[{"name": "worker", "replicas": 1}],
                           slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                                        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    files = slurm_files(cluster)
    jail = make_thin_jail(work / "jail")
    box = SlurmSandbox(work / "box", files, controller_host(cluster), b"k" * 1024, names=[NODE], slurmd=NODE,
                       jail=jail, node_conf=worker_node_conf(cluster.spec.node_sets[0]))
    if not box.status["ready"]:
        raise SystemExit(f"sandbox not ready: {box.status}\n{box.slurmd_log()}")
    return box, work / "box" / "etc-slurm" / "plugstack.conf", files


def use_plugstack(box, plugstack: Path, text: str) -> None:
    """Switch plugstack.conf for the next steps. slurmd is configless: its steps read the copy it
    fetched, so the change goes through `scontrol reconfigure` and is waited for in slurmd's copy."""
    plugstack.write_text(text)
    assert box.run("scontrol", "reconfigure").returncode == 0
    deadline = time.monotonic() + 60
    while box.run("cat", "/run/slurm/conf/plugstack.conf").stdout != text:
        assert time.monotonic() < deadline, "slurmd did not fetch the new plugstack.conf"
        time.sleep(0.2)


def _alternate(box, plugstack: Path, plugged: str, measure, rounds: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"plugin": [], "none": []}
    for i in range(rounds):
        for mode in (("plugin", "none") if i % 2 == 0 else ("none", "plugin")):
            use_plugstack(box, plugstack, plugged if mode == "plugin" else NO_PLUGIN)
            results[mode].extend(measure(box))
    use_plugstack(box, plugstack, plugged)
    return results


def _step_latencies(box, n: int = 10) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        proc = box.run("srun", "-w", NODE, "true")
        out.append(time.perf_counter() - started)
        assert proc.returncode == 0, proc.stderr
    return out


def bench_steps(rounds: int = 6) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box, plugstack, files = _sandbox(Path(tmp))
        with box:
            _step_latencies(box, 3)  # warm-up
            res = _alternate(box, plugstack, files["plugstack.conf"], _step_latencies, rounds)
    with_p, without = statistics.median(res["plugin"]), statistics.median(res["none"])
    print(f"step launch (srun true), {len(res['plugin'])} steps each: plugin {with_p * 1e3:.1f} ms, "
          f"none {without * 1e3:.1f} ms (median); ratio plugin/none = {with_p / without:.3f}")


def _throughput(box, jobs: int = 25) -> list[float]:
    started = time.perf_counter()
    ids = []
    for _ in range(jobs):
        proc = box.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true")
        assert proc.returncode == 0, proc.stderr
        ids.append(proc.stdout.strip())
    for job in ids:
        state = box.wait_job(job, timeout=300)["JobState"]
        assert state == "COMPLETED", state
    return [jobs / (time.perf_counter() - started)]


def bench_sbatch(rounds: int = 4) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box, plugstack, files = _sandbox(Path(tmp))
        with box:
            res = _alternate(box, plugstack, files["plugstack.conf"], _throughput, rounds)
    with_p, without = statistics.median(res["plugin"]), statistics.median(res["none"])
    print(f"sbatch throughput ({rounds} rounds of 25 jobs): plugin {with_p:.2f} jobs/s, none {without:.2f} "
          f"jobs/s (median); ratio plugin/none = {with_p / without:.3f}")


def bench_populate(source: Path | None = None) -> None:
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        tmp = Path(tmp)
        if source is None:
            source = _jail_rootfs(tmp / "rootfs")
        files = sum(1 for _ in source.rglob("*"))
        (tmp / "a").mkdir()
        (tmp / "b").mkdir()
        subprocess.run(["sync"])
        t0 = time.perf_counter()
        subprocess.run(f"tar -C {source} -cf - . | tar -C {tmp / 'a'} -xf -", shell=True, check=True)
        t_tar = time.perf_counter() - t0
        t0 = time.perf_counter()
        populate(str(source), str(tmp / "b"), overwrite=False)
        t_fill = time.perf_counter() - t0
        t0 = time.perf_counter()
        populate(str(source), str(tmp / "b"), overwrite=False)
        t_rerun = time.perf_counter() - t0
        t0 = time.perf_counter()
        populate(str(source), str(tmp / "b"), overwrite=True)
        t_over = time.perf_counter() - t0
    print(f"populate-jail, {files} entries: first fill {t_fill:.2f} s, tar|tar {t_tar:.2f} s, speed ratio "
          f"populate/tar = {t_tar / t_fill:.2f}; re-run {t_rerun * 1e3:.1f} ms; overwrite re-run {t_over:.2f} s")


def _jail_rootfs(target: Path) -> Path:
    """The real jail image's root filesystem, unpacked (images.build must have run)."""
    cid = podman("create", image_ref("jail"), "true").stdout.strip()
    try:
        target.mkdir()
        exported = podman("export", "-o", str(target.parent / "jail.tar"), cid)
        assert exported.returncode == 0
        subprocess.run(["tar", "-C", str(target), "-xf", str(target.parent / "jail.tar")], check=True)
    finally:
        podman("rm", cid)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["steps", "sbatch", "populate", "all"])
    args = parser.parse_args()
    for name, fn in (("steps", bench_steps), ("sbatch", bench_sbatch), ("populate", bench_populate)):
        if args.what in (name, "all"):
            fn()


if __name__ == "__main__":
    main()
