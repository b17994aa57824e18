"""Container job start-up (Pyxis + enroot), measured on the e2e's real containers in one run.

  python -m bench.containers [--rounds 10]

One worker of a node set with Pyxis, alice's Debian 12 image (172 MB in podman, a 135 MB .sqsh made
with `enroot import podman://`) in the jail. Every step is launched by srun on the worker itself, as
alice, and timed there (no podman exec in the figures):
  - a plain step (`srun true`) and a step in a named container that already exists
    (`srun --container-name=… true`): the ratio is what a cached container costs per step;
  - a first start from the .sqsh (`srun --container-image=… true`: enroot create, start, remove), and
    `enroot create` alone, run inside a plain step: the share of the first start that is unpacking;
  - mounted against unpacked (spec.plugStack.pyxis.mountImages): the first start of that image and of
    a ~2 GB one (the same with 1.9 GB of incompressible data added), Pyxis with `use_squashfuse=1`
    against the same worker with plugstack.conf swapped to unpack, in alternating phases; and a
    second user's first start of the same file, mounted, right after the first user's.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import paramiko

from images.build import build_all
from images.podman import podman
from soperator.render.configs import slurm_files
from tests.support.e2e_cluster import add_user, e2e_cluster, running
from tests.support.enroot_host import bookworm_image, import_podman_image
from tests.support.wait import until as _wait

WORKER = "e2e-box-0"
IMAGE = "/home/alice/bookworm.sqsh"
BIG_IMAGE = "/home/alice/big.sqsh"
BIG_EXTRA_MIB = 1900
BOX = [{"name": "box", "replicas": 1, "pyxis": {"enabled": True}}]
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


def _timed(rounds: int, commands: dict[str, list[str]], user: str = "alice") -> dict[str, list[float]]:
    proc = podman("exec", WORKER, "runuser", "-u", user, "--", "python3", "-c", TIMER, str(rounds),
                  json.dumps(commands), timeout=3600)
    return json.loads(proc.stdout)


def _use_plugstack(cluster, text: str) -> None:
    """plugstack.conf swapped under the running cluster, as an admin's change reaches it."""
    cluster.store.update_config_map("e2e-slurm-configs", {"plugstack.conf": text})
    _wait(lambda: cluster.exec(WORKER, "cat", "/run/slurm/conf/plugstack.conf") == text, 120,
          "the worker to read the new plugstack.conf")


def measure_mounted(cluster, rounds: int) -> dict:
    """First starts, mounted and unpacked, of both images; phases alternate (mounted first). Leaves
    the worker unpacking."""
    mounted = slurm_files(cluster.cluster)["plugstack.conf"]
    unpacked = slurm_files(e2e_cluster(nodeSets=BOX))["plugstack.conf"]
    assert "use_squashfuse=1" in mounted and "use_squashfuse" not in unpacked
    srun = ["srun", "-w", WORKER]
    runs: dict[str, list[float]] = {}
    for phase in range(2):
        for mode, text in (("mounted", mounted), ("unpacked", unpacked)):
            _use_plugstack(cluster, text)
            for name, image in (("small", IMAGE), ("big", BIG_IMAGE)):
                key = f"{mode}_{name}"
                runs[key] = runs.get(key, []) + _timed(max(2, rounds // 4), {key: [*srun, f"--container-image={image}",
                                                                                   "true"]})[key]
            if mode == "mounted":  # bob right after alice: one file, no per-user unpacking
                runs["mounted_second_user"] = runs.get("mounted_second_user", []) + _timed(
                    max(2, rounds // 4), {"b": [*srun, f"--container-image={IMAGE}", "true"]}, user="bob")["b"]
    _use_plugstack(cluster, unpacked)  # measure()'s figures are the unpacked ones, as before
    median = {k: statistics.median(v) for k, v in runs.items()}
    return {"mounted_first_start_small_s": round(median["mounted_small"], 3),
            "unpacked_first_start_small_s": round(median["unpacked_small"], 3),
            "unpacked_vs_mounted_small": round(median["unpacked_small"] / median["mounted_small"], 2),
            "mounted_first_start_big_s": round(median["mounted_big"], 3),
            "unpacked_first_start_big_s": round(median["unpacked_big"], 3),
            "unpacked_vs_mounted_big": round(median["unpacked_big"] / median["mounted_big"], 2),
            "second_user_mounted_small_s": round(median["mounted_second_user"], 3),
            "runs_s": {k: [round(x, 2) for x in v] for k, v in runs.items()}}


def make_big_image(small: Path, work: Path) -> Path:
    """The small image plus BIG_EXTRA_MIB of random data, squashed as enroot does (data blocks stored
    uncompressed: `-comp lzo -noD`, enroot's default ENROOT_SQUASH_OPTIONS)."""
    root = work / "big-root"
    subprocess.run(["unsquashfs", "-q", "-d", str(root), str(small)], check=True, capture_output=True)
    with open(root / "opt-weights.bin", "wb") as fh:
        for _ in range(BIG_EXTRA_MIB):
            fh.write(os.urandom(2**20))
    big = work / "big.sqsh"
    subprocess.run(["mksquashfs", str(root), str(big), "-comp", "lzo", "-noD", "-quiet", "-no-progress"], check=True,
                   capture_output=True)
    shutil.rmtree(root)
    return big


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
        big = make_big_image(work / "bookworm.sqsh", work)
        (work / "cluster").mkdir()
        with contextlib.contextmanager(running)(work / "cluster", nodeSets=BOX,
                                                plugStack={"pyxis": {"mountImages": True}}) as cluster:
            cluster.populate("bench")
            key = paramiko.RSAKey.generate(2048)  # alice and bob never log in here; add_user wants a key
            for user, uid in (("alice", 1000), ("bob", 1001)):
                add_user(cluster.jail, user, uid, f"{key.get_name()} {key.get_base64()}")
            home = cluster.jail / "home" / "alice"
            for source, name in ((work / "bookworm.sqsh", "bookworm.sqsh"), (big, "big.sqsh")):
                shutil.copy(source, home / name)
                shutil.chown(home / name, 1000, 1000)
                os.chmod(home / name, 0o644)
            os.chmod(home, 0o755)  # bob reads alice's image
            cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
            cluster.start(WORKER, cluster.pod("StatefulSet", "e2e-box"))
            _wait(lambda: podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t", check=False).stdout.strip()
                  == "idle", 120, "the worker")
            mounted = measure_mounted(cluster, args.rounds)
            result = measure(args.rounds) | {"image_mib": {
                "small": round(os.path.getsize(work / "bookworm.sqsh") / 2**20),
                "big": round(os.path.getsize(big) / 2**20)}} | mounted
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
