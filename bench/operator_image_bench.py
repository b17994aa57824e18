"""Operator start-up from its container image against the same operator from the venv, on the real
control plane: `python -m bench.operator_image_bench [--rounds 3]`.

Both run `soperator run -n bench` as the slurm-operator chart's ServiceAccount (a token kubeconfig),
alternating, one fresh SlurmCluster per round. Figures per round: start -> /healthz answers, and
start -> the new SlurmCluster has a status. Reported as medians and the ratio image / venv.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.operator_bench import _manifest, _wait
from images.build import build_all, image_ref
from images.podman import podman
from tests.cluster.controlplane import ControlPlane, free_port, http_ok
from tests.cluster.tools import ensure_tools
from tests.kube.conftest import Kubectl, install_crd
from tests.support.podman_pods import security_args

ROOT = Path(__file__).resolve().parent.parent
SA = "ops-slurm-operator"


def _token_kubeconfig(plane: ControlPlane, kubectl: Kubectl, path: Path) -> None:
    token = kubectl("-n", "bench", "create", "token", SA, "--duration=1h").stdout.strip()
    ca = base64.b64encode(plane.pki.ca_cert.read_bytes()).decode()
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
              "clusters": [{"name": "c", "cluster": {"server": plane.url, "certificate-authority-data": ca}}],
              "users": [{"name": "sa", "user": {"token": token}}],
              "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": "bench"}}]}
    path.write_text(json.dumps(config))
    path.chmod(0o644)  # the image runs as an unprivileged user


def _start(kind: str, kubeconfig: Path, health: int, metrics: int, security: list[str]):
    args = ["run", "-n", "bench", "--health-port", str(health)]
    if kind == "venv":
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "SOPERATOR_METRICS_PORT": str(metrics)}
        proc = subprocess.Popen([sys.executable, "-m", "soperator.cli", *args], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return lambda: (proc.send_signal(signal.SIGTERM), proc.wait(20))
    tmp = Path(tempfile.mkdtemp(prefix="soperator-bench-tmp-"))
    tmp.chmod(0o777)
    cid = podman("run", "-d", "--network", "host", *security, "-v", f"{kubeconfig}:/kubeconfig:ro",
                 "-v", f"{tmp}:/tmp", "-e", "KUBECONFIG=/kubeconfig",
                 "-e", f"SOPERATOR_METRICS_PORT={metrics}", image_ref("operator"), *args).stdout.strip()
    return lambda: (podman("rm", "-f", "-t", "10", cid), shutil.rmtree(tmp, ignore_errors=True))


def _round(kind: str, n: int, kubectl: Kubectl, kubeconfig: Path,
           security: list[str]) -> tuple[float, float]:
    name = f"{kind}-{n}"
    kubectl("apply", "-f", "-", input=_manifest(name))
    health = free_port()
    started = time.perf_counter()
    stop = _start(kind, kubeconfig, health, free_port(), security)
    try:
        # From before `podman run` / Popen: the container's own start-up counts.
        _wait(lambda: http_ok(f"http://127.0.0.1:{health}/healthz"))
        healthy = time.perf_counter() - started
        _wait(lambda: kubectl("-n", "bench", "get", "slurmcluster", name, "-o",
                              "jsonpath={.status.phase}").stdout != "")
        return healthy, time.perf_counter() - started
    finally:
        stop()
        kubectl("-n", "bench", "delete", "slurmcluster", name, "--wait=false")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    build_all(only=["operator"])
    work = Path(tempfile.mkdtemp(prefix="soperator-bench-"))
    plane = ControlPlane(work / "cp").start()
    try:
        tools = ensure_tools()
        kubectl = Kubectl(tools["kubectl"], plane.kubeconfig)
        install_crd(kubectl)
        kubectl("create", "namespace", "bench")
        subprocess.run([str(tools["helm"]), "--kubeconfig", str(plane.kubeconfig), "install", "ops",
                        str(ROOT / "charts" / "slurm-operator"), "-n", "bench", "--set", "crds.enabled=false"],
                       check=True, capture_output=True)
        kubeconfig = work / "sa.kubeconfig"
        _token_kubeconfig(plane, kubectl, kubeconfig)
        # The image runs as the chart's Deployment says (user, read-only root, capabilities).
        deployment = json.loads(kubectl("-n", "bench", "get", "deployment", SA, "-o", "json").stdout)
        pod = deployment["spec"]["template"]["spec"]
        security = security_args(pod, pod["containers"][0])
        figures: dict[str, list[tuple[float, float]]] = {"venv": [], "image": []}
        for n in range(args.rounds):
            for kind in (("venv", "image") if n % 2 == 0 else ("image", "venv")):
                figures[kind].append(_round(kind, n, kubectl, kubeconfig, security))
        med = {k: [statistics.median(x[i] for x in v) for i in (0, 1)] for k, v in figures.items()}
        for label, i in (("start -> /healthz", 0), ("start -> first status written", 1)):
            print(f"{label}: image {med['image'][i]:.2f} s, venv {med['venv'][i]:.2f} s, "
                  f"image/venv = {med['image'][i] / med['venv'][i]:.2f}")
        return 0
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
