"""mksquashfs's memory in an image cache import: bounded as soperator runs it (`-mem 128M` added to
the node set's options, render/worker.py) against mksquashfs's own default (a quarter of the node's
memory, whatever the pod's limit), in one run.

  python -m bench.squash_memory [--rounds 3] [--mib 1024] [--limit 512m]

In a container of the jail image (the imports' mksquashfs), with a memory limit as a worker has one:
a tree of `--mib` MiB of random data (files of 1 to 64 MiB) and 20,000 small files, squashed with
enroot's default options, alternately with and without the bound. Per run: the child's peak resident
memory (wait4), wall time, and how it ended (a run the OOM killer ends shows -9).
"""
from __future__ import annotations

import argparse
import json
import statistics

from images.build import build_all, image_ref
from images.podman import podman

OPTIONS = ["-comp", "lzo", "-noD", "-exit-on-error"]  # enroot's default, what a node set without its own gets
BOUND = ["-mem", "128M"]
# Run in the container: make the tree, then squash it `rounds` times each way, alternating.
SQUASH = """
import json, os, random, subprocess, sys, time
mib, rounds, options, bound = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
random.seed(1)
os.makedirs("/data/small")
left = mib
while left > 0:
    size = min(left, random.randint(1, 64))
    with open(f"/data/big-{left}", "wb") as fh:
        fh.write(os.urandom(size << 20))
    left -= size
for i in range(20000):
    with open(f"/data/small/{i}", "w") as fh:
        fh.write(str(i) * random.randint(1, 200))
runs = {"bounded": [], "default": []}
for _ in range(rounds):
    for name, extra in (("bounded", bound), ("default", [])):
        started = time.perf_counter()
        child = subprocess.Popen(["mksquashfs", "/data", "/out.sqsh", "-noappend", "-no-progress", *options, *extra],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        runs[name].append({"peak_mib": round(usage.ru_maxrss / 1024), "seconds": round(time.perf_counter() - started, 2),
                           "exit": os.waitstatus_to_exitcode(status)})
        if os.path.exists("/out.sqsh"):
            os.unlink("/out.sqsh")
print(json.dumps(runs))
"""


def measure(rounds: int, mib: int, limit: str) -> dict:
    proc = podman("run", "--rm", "--network", "none", "--memory", limit, image_ref("jail"), "python3", "-c", SQUASH,
                  str(mib), str(rounds), json.dumps(OPTIONS), json.dumps(BOUND), timeout=3600)
    runs = json.loads(proc.stdout)
    default_mem = podman("run", "--rm", "--network", "none", "--memory", limit, image_ref("jail"),
                         "mksquashfs", "-mem-default").stdout.strip()
    summary = {}
    for name, each in runs.items():
        finished = [r for r in each if r["exit"] == 0]
        summary[name] = {"completed": f"{len(finished)}/{len(each)}",
                         "peak_mib_median": statistics.median(r["peak_mib"] for r in each),
                         "seconds_median_completed": statistics.median(r["seconds"] for r in finished) if finished else None}
    return {"rounds": rounds, "tree_mib": mib, "container_memory_limit": limit,
            "mksquashfs_default_cache_mib_in_it": default_mem, "options": OPTIONS, "bound": BOUND,
            "summary": summary, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--limit", default="512m", help="the container's memory limit, as a worker pod's")
    args = parser.parse_args(argv)
    build_all(only=["jail"])
    print(json.dumps(measure(args.rounds, args.mib, args.limit), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
