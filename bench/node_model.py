"""The dynamic node model, measured on the e2e's real containers (one run; report ratios and counts).

  python -m bench.node_model register      worker container start -> node idle in Slurm, median of 10
  python -m bench.node_model reconfigure   ConfigMap change -> every slurmd has the new file; pods replaced
  python -m bench.node_model all
"""
from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from images.build import build_all
from images.podman import podman
from soperator.render.configs import slurm_files
from tests.support.e2e_cluster import Cluster, e2e_cluster
from tests.support.wait import until as _wait


def _ctl(*argv: str) -> str:
    return podman("exec", "e2e-controller-0", *argv, check=False).stdout


def _started(node: str) -> str:
    found = re.findall(r"SlurmdStartTime=(\S+)", _ctl("scontrol", "show", "node", node))
    return found[0] if found else ""


def _idle(node: str) -> bool:
    return _ctl("sinfo", "-h", "-n", node, "-o", "%t").strip() == "idle"


def register(cluster: Cluster, rounds: int = 10) -> dict:
    """Each round: a fresh worker container, timed until Slurm shows its new registration idle; then
    it stops (SIGTERM: it deletes its record) before the next round."""
    worker = cluster.pod("StatefulSet", "e2e-worker")
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        cluster.start("e2e-worker-0", worker)
        _wait(lambda: _started("e2e-worker-0") and _idle("e2e-worker-0"), 120, "registration")
        seconds.append(time.perf_counter() - started)
        podman("stop", "-t", "30", "e2e-worker-0")
        podman("rm", "e2e-worker-0")
        _wait(lambda: "e2e-worker-0" not in _ctl("sinfo", "-h", "-N", "-o", "%N"), 60, "the record to go")
    return {"rounds": rounds, "median_s": round(statistics.median(seconds), 2),
            "min_s": round(min(seconds), 2), "max_s": round(max(seconds), 2)}


def reconfigure(cluster: Cluster, rounds: int = 3) -> dict:
    """Each round: a new partition MaxTime in the ConfigMap, timed until both workers' configless copy
    has it; counts the containers replaced (by their ids)."""
    worker = cluster.pod("StatefulSet", "e2e-worker")
    for i in range(2):
        cluster.start(f"e2e-worker-{i}", worker)
    _wait(lambda: _idle("e2e-worker-0") and _idle("e2e-worker-1"), 120, "two workers")
    names = ("e2e-controller-0", "e2e-worker-0", "e2e-worker-1")
    ids = {n: podman("inspect", "--format", "{{.Id}}", n).stdout.strip() for n in names}
    seconds = []
    for minutes in range(41, 41 + rounds):
        started = time.perf_counter()
        files = slurm_files(e2e_cluster(partitions=[{"name": "main", "default": True, "maxTime": str(minutes)}]))
        cluster.store.update_config_map("e2e-slurm-configs", files)
        _wait(lambda: all(f"MaxTime={minutes}" in podman("exec", w, "cat", "/run/slurm/conf/slurm.conf").stdout
                          for w in ("e2e-worker-0", "e2e-worker-1")), 120, "the new config on every worker")
        seconds.append(time.perf_counter() - started)
    replaced = sum(podman("inspect", "--format", "{{.Id}}", n).stdout.strip() != ids[n] for n in names)
    # The controller polls its files every 5 s: most of each figure is that interval.
    return {"rounds": rounds, "median_s": round(statistics.median(seconds), 2), "pods_replaced": replaced}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["register", "reconfigure", "all"])
    args = parser.parse_args(argv)
    build_all()
    for what in (["register", "reconfigure"] if args.what == "all" else [args.what]):
        with tempfile.TemporaryDirectory(prefix="soperator-bench-") as tmp:
            cluster = Cluster(Path(tmp))
            try:
                cluster.open()
                cluster.populate("bench")
                cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
                _wait(lambda: "UP" in _ctl("scontrol", "ping"), 60, "slurmctld")
                result = register(cluster) if what == "register" else reconfigure(cluster)
                print(f"{what}: {result}")
            finally:
                cluster.teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
