"""Registry images through the workers' image cache (pyxis.imageCache), on the e2e's real containers and
a real registry (CNCF Distribution on the host side of the test network), in one run.

  python -m bench.image_cache [--rounds 4]

One Pyxis worker, images mounted (plugStack.pyxis.mountImages). Two images pushed: Debian 12 (about
130 MB as a squashfs) and the same with 1.9 GB of incompressible data added. Every step is launched by
srun on the worker itself and timed there (no podman exec in the figures):
  - a first start with the cache cold (`srun --container-image=docker://… true`: digest, import,
    publish, mount), the cache emptied by root before each round;
  - a second user's first start right after, the cache warm (digest, lookup, mount);
  - the same image as a squashfs file in the jail, mounted: what the cache's lookup adds to a start.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
from pathlib import Path

import paramiko

from bench.containers import TIMER
from images.build import build_all
from images.podman import podman
from tests.cluster.controlplane import free_port
from tests.support.e2e_cluster import add_user, running
from tests.support.enroot_host import bookworm_image, import_podman_image
from tests.support.image_registry import Registry
from tests.support.wait import until as _wait

WORKER = "e2e-box-0"
HOST = "registry.e2e.test"
BIG_EXTRA_MIB = 1900
BOX = [{"name": "box", "replicas": 1, "pyxis": {"enabled": True, "enrootConfig": {"ENROOT_ALLOW_HTTP": "yes"}}}]


def _timed(rounds: int, argv: list[str], user: str) -> list[float]:
    proc = podman("exec", WORKER, "runuser", "-u", user, "--", "python3", "-c", TIMER, str(rounds),
                  json.dumps({"t": argv}), timeout=3600)
    return json.loads(proc.stdout)["t"]


def _empty_cache() -> None:
    podman("exec", WORKER, "sh", "-c", "rm -f /run/enroot/images/*.sqsh /run/enroot/images/.index/*.json")


def big_image(work: Path, small: str) -> str:
    """The small image plus BIG_EXTRA_MIB of random data in a layer of its own."""
    (work / "big").mkdir()
    (work / "big" / "Containerfile").write_text(
        f"FROM {small}\nRUN head -c {BIG_EXTRA_MIB}M /dev/urandom > /opt-weights.bin\n")
    ref = "localhost/soperator/test-bookworm-big:12"
    podman("build", "-q", "-t", ref, str(work / "big"), timeout=1800)
    return ref


def measure(rounds: int, images: dict[str, str], files: dict[str, str]) -> dict:
    srun = ["srun", "-w", WORKER]
    runs: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, uri in images.items():
            _empty_cache()
            runs.setdefault(f"cold_{name}", []).extend(_timed(1, [*srun, f"--container-image={uri}", "true"], "alice"))
            runs.setdefault(f"warm_{name}", []).extend(_timed(1, [*srun, f"--container-image={uri}", "true"], "bob"))
            runs.setdefault(f"file_{name}", []).extend(
                _timed(1, [*srun, f"--container-image={files[name]}", "true"], "bob"))
    median = {k: statistics.median(v) for k, v in runs.items()}
    out: dict = {"rounds": rounds}
    for name in images:
        out |= {f"cold_first_start_{name}_s": round(median[f"cold_{name}"], 3),
                f"warm_first_start_{name}_s": round(median[f"warm_{name}"], 3),
                f"file_first_start_{name}_s": round(median[f"file_{name}"], 3),
                f"cold_vs_warm_{name}": round(median[f"cold_{name}"] / median[f"warm_{name}"], 1),
                f"warm_vs_file_{name}": round(median[f"warm_{name}"] / median[f"file_{name}"], 2)}
    return out | {"runs_s": {k: [round(x, 2) for x in v] for k, v in runs.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    build_all()
    with tempfile.TemporaryDirectory(prefix="soperator-bench-") as tmp:
        work = Path(tmp)
        small = bookworm_image(work)
        refs = {"small": small, "big": big_image(work, small)}
        (work / "cluster").mkdir()
        with contextlib.contextmanager(running)(work / "cluster", nodeSets=BOX,
                                                plugStack={"pyxis": {"mountImages": True}}) as cluster:
            registry = Registry(work / "registry", cluster.dns.gateway(), free_port())
            registry.start()
            try:
                cluster.dns.add(HOST, registry.address)
                images = {name: registry.push(ref, f"bench-{name}:1").replace(registry.host, f"{HOST}:{registry.port}")
                          for name, ref in refs.items()}
                cluster.populate("bench")
                key = paramiko.RSAKey.generate(2048)  # alice and bob never log in here; add_user wants a key
                for user, uid in (("alice", 1000), ("bob", 1001)):
                    add_user(cluster.jail, user, uid, f"{key.get_name()} {key.get_base64()}")
                files = {}
                for name, ref in refs.items():  # the same images as files in the jail, readable by all
                    (work / f"import-{name}").mkdir()
                    import_podman_image(ref, cluster.jail / "opt" / f"{name}.sqsh", work / f"import-{name}")
                    files[name] = f"/opt/{name}.sqsh"
                cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
                cluster.start(WORKER, cluster.pod("StatefulSet", "e2e-box"))
                _wait(lambda: podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t", check=False)
                      .stdout.strip() == "idle", 120, "the worker")
                result = measure(args.rounds, images, files)
                result["image_mib"] = {name: round((cluster.jail / "opt" / f"{name}.sqsh").stat().st_size / 2**20)
                                       for name in refs}
            finally:
                registry.stop()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
