"""Container job start-up (Pyxis + enroot), measured on the e2e's real containers in one run.

  python -m bench.containers [--rounds 10]

One worker of a node set with Pyxis, alice's Debian 12 image (172 MB in podman, a 135 MB .sqsh made
with `enroot import podman://`) in the jail. Every step is launched by srun on the worker itself, as
alice, and timed there (no podman exec in the figures):
  - a plain step (`srun true`) and a step in a named container that already exists
    (`srun --container-name=… true`): the ratio is what a cached container costs per step;
  - a first start from the .sqsh (`srun --container-image=… true`: enroot create, start, remove), and
    `enroot create` alone, run inside a plain step: the share of the first start that is unpacking.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import tempfile
from pathlib import Path

import paramiko

from images.build import build_all
from images.podman import podman
from tests.support.e2e_cluster import add_user, running
from tests.support.enroot_host import bookworm_image, import_podman_image
from tests.support.wait import until as _wait

WORKER = "e2e-box-0"
IMAGE = "/home/alice/bookworm.sqsh"
# Run on the worker as alice: each command `rounds` times, wall seconds of each.
TIMER = """
import json, subprocess, sys, time
rounds, commands = int(sys.argv[1]), json.loads(sys.argv[2])
out = {}
for name, argv in commands.items():
    seconds = []
    for i in range(rounds):
        argv_i = [a.replace("{i}", str(i)) for a in argv]
        started = time.perf_counter()
        proc = subprocess.run(argv_i, capture_output=True, text=True)
        seconds.append(time.perf_counter() - started)
        if proc.returncode != 0:
            sys.exit(f"{name}: {argv_i}: {proc.stderr[-2000:]}")
    out[name] = seconds
print(json.dumps(out))
"""


def _timed(rounds: int, commands: dict[str, list[str]]) -> dict[str, list[float]]:
    proc = podman("exec", WORKER, "runuser", "-u", "alice", "--", "python3", "-c", TIMER, str(rounds),
                  json.dumps(commands), timeout=3600)
    return json.loads(proc.stdout)


def measure(rounds: int) -> dict:
    srun = ["srun", "-w", WORKER]
    # Warm: the named container made once; the first unnamed start and slurmd's own first step paid.
    _timed(1, {"warm": [*srun, f"--container-image={IMAGE}", "--container-name=bench", "true"]})
    cached = _timed(rounds, {"plain": [*srun, "true"], "named": [*srun, "--container-name=bench", "true"]})
    # Alternating rounds, so that the machine's drift touches both alike.
    first, create = {"first_start": []}, []
    for _ in range(max(3, rounds // 2)):
        first["first_start"] += _timed(1, {"first_start": [*srun, f"--container-image={IMAGE}", "true"]})["first_start"]
        create += _create_s(1)
    median = {k: statistics.median(v) for k, v in (cached | first | {"create": create}).items()}
    return {"rounds": rounds, "plain_step_s": round(median["plain"], 3),
            "named_container_step_s": round(median["named"], 3),
            "named_vs_plain": round(median["named"] / median["plain"], 2),
            "first_start_from_sqsh_s": round(median["first_start"], 3),
            "enroot_create_alone_s": round(median["create"], 3),
            "create_share_of_first_start": round(median["create"] / median["first_start"], 2),
            "first_start_runs_s": [round(x, 2) for x in first["first_start"]],
            "create_runs_s": [round(x, 2) for x in create]}


def _create_s(rounds: int) -> list[float]:
    """enroot create's own time, timed inside a plain step (its launch excluded), the copy removed
    after each."""
    step = (f"s=$(date +%s%N); enroot create -n bench-create {IMAGE} >/dev/null 2>&1; e=$(date +%s%N); "
            "enroot remove -f bench-create >/dev/null; echo $(( (e - s) / 1000000 ))")
    return [int(podman("exec", WORKER, "runuser", "-u", "alice", "--", "srun", "-w", WORKER, "sh", "-c", step,
                       timeout=600).stdout) / 1000 for _ in range(rounds)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    build_all()
    with tempfile.TemporaryDirectory(prefix="soperator-bench-") as tmp:
        work = Path(tmp)
        import_podman_image(bookworm_image(work), work / "bookworm.sqsh", work)
        box = [{"name": "box", "replicas": 1, "pyxis": {"enabled": True}}]
        (work / "cluster").mkdir()
        with contextlib.contextmanager(running)(work / "cluster", nodeSets=box) as cluster:
            cluster.populate("bench")
            key = paramiko.RSAKey.generate(2048)  # alice never logs in here; add_user wants a key
            add_user(cluster.jail, "alice", 1000, f"{key.get_name()} {key.get_base64()}")
            shutil.copy(work / "bookworm.sqsh", cluster.jail / "home" / "alice" / "bookworm.sqsh")
            shutil.chown(cluster.jail / "home" / "alice" / "bookworm.sqsh", 1000, 1000)
            cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
            cluster.start(WORKER, cluster.pod("StatefulSet", "e2e-box"))
            _wait(lambda: podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t", check=False).stdout.strip()
                  == "idle", 120, "the worker")
            result = measure(args.rounds)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
