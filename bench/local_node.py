"""The local single-node Kubernetes (tests/cluster/local.py), measured (one run; report ratios and counts).

  python -m bench.local_node build       Go build of the node's components: cold (empty Go build cache
                                         and binaries; the module cache stays) vs cached rerun
  python -m bench.local_node node        node start -> Node Ready, median of 3 (control plane kept)
  python -m bench.local_node first-job   `helm install` -> first sbatch accepted, split by phase,
                                         median of 3 (images already imported; the operator's phase
                                         counts in the first round only, it stays installed)
  python -m bench.local_node config      a partition's maxTime changed -> in force in slurmctld, through
                                         the operator (it annotates the controller pod, the kubelet
                                         refreshes the ConfigMap at once), against the kubelet's own
                                         refresh (operator scaled to 0, ConfigMap edited), alternating
  python -m bench.local_node upgrade     a 24.11 cluster with accounting, a job running and one queued,
                                         upgraded in place to 26.05 (tests/support/upgrade_scenario.py):
                                         seconds until each part moved and in all, jobs killed (one run)
Needs the machine to itself: no other local node (test session or `quickstart.py up`) may run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from tests.cluster import build
from tests.cluster.local import LocalCluster
from tests.cluster.node import NODE_IP
from tests.cluster.tools import ensure_tools

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import quickstart  # noqa: E402  (examples/ is not a package)


def bench_build() -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-gocache-") as tmp:
        os.environ["GOCACHE"] = f"{tmp}/gocache"
        began = time.monotonic()
        build.ensure_binaries(bin_dir=Path(tmp) / "bin")
        cold = time.monotonic() - began
        began = time.monotonic()
        build.ensure_binaries(bin_dir=Path(tmp) / "bin")
        cached = time.monotonic() - began
    return {"cold_s": round(cold, 1), "cached_s": round(cached, 2), "cold/cached": round(cold / cached)}


def bench_node(cluster: LocalCluster, rounds: int = 3) -> dict:
    cluster.start_plane()
    seconds = []
    for _ in range(rounds):
        cluster.node.stop()
        began = time.monotonic()
        cluster.node.start()
        seconds.append(time.monotonic() - began)
    return {"node_ready_s": [round(s, 2) for s in seconds], "median_s": round(statistics.median(seconds), 2)}


def installed(cluster: LocalCluster, name: str, key: Path, slurm_version: str | None = None,
               accounting: bool = False, nodes: int = 1) -> tuple[SimpleNamespace, list[str]]:
    """The quick start's charts installed and ready; (its arguments, the ssh command to its login node).
    `nodes=2`: with the node set on the VM node, which must run already."""
    args = SimpleNamespace(kubeconfig=cluster.plane.kubeconfig, namespace="bench", cluster_name=name,
                           volumes_dir=cluster.volumes, workers=2 if nodes == 1 else 1, jail_size="8Gi",
                           ssh_key=key.with_suffix(".pub"), set_operator=["resyncSeconds=5"], timeout=1200, on="local",
                           slurm_version=slurm_version, accounting=accounting, nodes=nodes, values=[])
    quickstart.install_charts(args)
    quickstart.wait_ready(args)
    host, port, _ = quickstart.login_address(args)
    return args, ["ssh", "-p", str(port), "-i", str(key), "-o", "StrictHostKeyChecking=no", "-o",
                  "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"root@{host}"]


def _first_job(cluster: LocalCluster, name: str, key: Path) -> dict:
    began = time.monotonic()
    args, ssh = installed(cluster, name, key)
    phases = dict(args.phase_seconds)
    while "2 idle" not in subprocess.run([*ssh, "sinfo -h -o '%D %t'"], capture_output=True, text=True).stdout:
        time.sleep(0.5)
    phases["slurmd registered"] = time.monotonic() - began
    subprocess.run([*ssh, "sbatch --wrap true"], check=True, capture_output=True)
    phases["sbatch accepted"] = time.monotonic() - began
    for release in (name, f"{name}-storage"):  # the operator stays for the next round
        subprocess.run(["helm", "--kubeconfig", str(args.kubeconfig), "uninstall", release, "-n", "bench", "--wait"],
                       capture_output=True)
    return phases


def _in_force(ssh: list[str], max_time: str, timeout: float = 600) -> float:
    began = time.monotonic()
    while f"MaxTime={max_time} " not in subprocess.run([*ssh, "scontrol -o show partition main"],
                                                       capture_output=True, text=True).stdout:
        if time.monotonic() - began > timeout:
            raise SystemExit(f"MaxTime={max_time} not in force after {timeout:.0f} s")
        time.sleep(0.5)
    return time.monotonic() - began


def bench_config(cluster: LocalCluster, rounds: int = 3) -> dict:
    """Seconds from a partition's maxTime change to `scontrol show partition` on the login node."""
    _install_images(cluster)
    kubectl = ["kubectl", "--kubeconfig", str(cluster.plane.kubeconfig), "-n", "bench"]
    seconds: dict[str, list[float]] = {"operator": [], "kubelet only": []}
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        args, ssh = installed(cluster, "conf", key)
        for i in range(rounds):  # at most 9: `scontrol` writes 1:00:00 as 01:00:00
            hours = f"{i + 1}:00:00"
            spec = {"spec": {"partitions": [{"name": "main", "default": True, "maxTime": hours}]}}
            subprocess.run([*kubectl, "patch", "slurmcluster", "conf", "--type=merge", "-p", json.dumps(spec)], check=True,
                           capture_output=True)
            seconds["operator"].append(_in_force(ssh, f"0{hours}"))
            subprocess.run([*kubectl, "scale", "deployment", "--all", "--replicas=0"], check=True, capture_output=True)
            # Gone, not only told to go: a terminating operator's last pass would write the spec's file back.
            subprocess.run([*kubectl, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=slurm-operator",
                            "--timeout=120s"], check=True, capture_output=True)
            config = json.loads(subprocess.run([*kubectl, "get", "configmap", "conf-slurm-configs", "-o", "json"],
                                               check=True, capture_output=True, text=True).stdout)
            minutes = f"{i + 1:02d}:30:00"
            conf = config["data"]["slurm.conf"].replace(f"MaxTime={hours} ", f"MaxTime={minutes} ")
            subprocess.run([*kubectl, "patch", "configmap", "conf-slurm-configs", "--type=merge", "-p",
                            json.dumps({"data": {"slurm.conf": conf}})], check=True, capture_output=True)
            seconds["kubelet only"].append(_in_force(ssh, minutes))
            # Back as it was before the next round: the operator running, the spec's file in force.
            subprocess.run([*kubectl, "scale", "deployment", "--all", "--replicas=1"], check=True, capture_output=True)
            subprocess.run([*kubectl, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=300s"],
                           check=True, capture_output=True)
            _in_force(ssh, f"0{hours}")
    medians = {k: round(statistics.median(v), 1) for k, v in seconds.items()}
    return {"seconds": {k: [round(s, 1) for s in v] for k, v in seconds.items()}, "median_s": medians,
            "kubelet only / operator": round(medians["kubelet only"] / medians["operator"], 1), "rounds": rounds}


def _install_images(cluster: LocalCluster, slurm_version: str | None = None) -> float:
    tools = ensure_tools()
    os.environ["PATH"] = f"{tools['kubectl'].parent}:{os.environ['PATH']}"
    cluster.up()
    refs = quickstart.image_refs(SimpleNamespace(slurm_version=slurm_version))
    began = time.monotonic()
    cluster.node.import_images(refs)
    return time.monotonic() - began


def bench_upgrade(cluster: LocalCluster) -> dict:
    import paramiko

    from tests.kube.conftest import Kubectl
    from tests.support.ssh_session import Login
    from tests.support.upgrade_scenario import upgrade

    _install_images(cluster, "24.11")
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        args, _ = installed(cluster, "upg", key, slurm_version="24.11", accounting=True)
        kubectl = Kubectl(ensure_tools()["kubectl"], cluster.plane.kubeconfig)
        port = int(kubectl("-n", "bench", "get", "service", "upg-login", "-o", "jsonpath={.spec.ports[0].nodePort}").stdout)
        login = Login(NODE_IP, port, paramiko.Ed25519Key.from_private_key_file(str(key)), timeout=120)
        try:
            run = upgrade(kubectl, "bench", "upg", login)
        finally:
            login.close()
    return {"24.11 -> 26.05 (s)": run.seconds, "each part done at (s)": run.moved, "jobs killed": run.killed,
            "jobs (sacct)": run.jobs, "mixed-window samples": len(run.mixed),
            "jail refill (populateJail.overwrite) to its clients on 26.05 (s)": run.jail_seconds, "node": NODE_IP}


def bench_first_job(cluster: LocalCluster, rounds: int = 3) -> dict:
    imported = _install_images(cluster)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        for i in range(rounds):
            runs.append(_first_job(cluster, f"c{i}", key))
    phases = {p: round(statistics.median(r[p] for r in runs), 1) for p in runs[0]}
    return {"images import (s, once)": round(imported, 1), "median seconds from helm install, by phase": phases,
            "rounds": rounds, "node": NODE_IP}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("build", "node", "first-job", "config", "upgrade"))
    args = parser.parse_args()
    if args.what == "build":
        print(json.dumps(bench_build(), indent=1))
        return 0
    bench = {"node": bench_node, "first-job": bench_first_job, "config": bench_config,
             "upgrade": bench_upgrade}[args.what]
    print(json.dumps(on_a_local_node(bench), indent=1))
    return 0


def on_a_local_node(measure) -> dict:
    """`measure(cluster)` on a fresh local node, taken down (processes by PID, mounts) afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-local-node-"))
    cluster = LocalCluster(workdir)
    try:
        return measure(cluster)
    finally:
        cluster.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
