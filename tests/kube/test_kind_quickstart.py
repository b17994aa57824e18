"""The kind quick start's helm and kubectl steps, run unchanged against the test control plane.

The operator runs for real from its container image, in-cluster: the stand-in kubelet starts the
chart's Deployment pod with podman, with the service-account token a kubelet would mount, as the
chart's non-root, read-only, capability-less securityContext says. The other pods are reported
through their status (this control plane has no kubelet), so the script's waits for the operator
rollout and for the SlurmCluster's phase Ready are real waits on real controllers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from images.build import build_all
from images.podman import PodmanError
from tests.cluster.controlplane import free_port
from tests.kube.conftest import adopt_crd
from tests.kube.test_operator import scrape
from tests.support.kubelet_standin import KubeletStandIn
from tests.support_paths import ROOT

pytestmark = [pytest.mark.kube, pytest.mark.e2e]
SCRIPT = ROOT / "examples" / "kind" / "quickstart.py"


@pytest.fixture(scope="module")
def operator_image():
    try:
        return build_all(only=["operator"])
    except (PodmanError, OSError) as exc:
        pytest.fail(f"operator image build failed: {exc}", pytrace=False)


def _ssh_key(tmp_path) -> str:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return str(key) + ".pub"


def test_quickstart_installs_charts_and_waits_until_ready(operator_image, control_plane, tools, kubectl,
                                                          crd_installed, namespace, tmp_path,
                                                          service_account_token):
    adopt_crd(kubectl, "soperator", namespace)
    metrics_port, health_port = free_port(), free_port()
    env = {**os.environ, "PATH": f"{tools['kubectl'].parent}:{os.environ['PATH']}"}
    log = tmp_path / "quickstart.log"
    with open(log, "w") as out:  # the child keeps its own copy of the descriptor
        script = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--kubeconfig", str(control_plane.kubeconfig), "--namespace", namespace,
             "--cluster-name", "qs", "--ssh-key", _ssh_key(tmp_path), "--skip-ssh", "--timeout", "240",
             "--set-operator", f"metrics.port={metrics_port}", "--set-operator", f"healthPort={health_port}",
             "--set-operator", "resyncSeconds=5"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    kubelet = KubeletStandIn(kubectl, control_plane, namespace,
                             {"app.kubernetes.io/name": "slurm-operator"}, tmp_path / "kubelet")
    try:
        kubelet.run_until(lambda: script.poll() is not None, 300, "the quick start script")
        output = log.read_text()
        state = kubectl("-n", namespace, "get", "slurmcluster,pods,jobs,statefulsets", "-o", "wide").stdout
        assert script.returncode == 0, f"{output}\n--- objects:\n{state}\n--- operator:\n{kubelet.logs()[-4000:]}"
        assert f"done: SlurmCluster {namespace}/qs is Ready" in output

        cluster = json.loads(kubectl("-n", namespace, "get", "slurmcluster", "qs", "-o", "json").stdout)
        assert cluster["status"]["phase"] == "Ready"
        assert cluster["spec"]["login"]["service"]["type"] == "NodePort"
        assert cluster["status"]["workers"]["ready"] == 2
        # The real PV controller binds the claim to the chart's hostPath PV (on its own schedule).
        kubectl("-n", namespace, "wait", "pvc/qs-jail", "--for=jsonpath={.status.phase}=Bound", "--timeout=90s")
        claim = json.loads(kubectl("-n", namespace, "get", "pvc", "qs-jail", "-o", "json").stdout)
        assert claim["spec"]["volumeName"] == f"qs-{namespace}-jail"
        job = json.loads(kubectl("-n", namespace, "get", "job", "qs-populate-jail", "-o", "json").stdout)
        assert job["status"]["succeeded"] == 1  # completed by the real job controller
        # The containerised operator did this in-cluster, as the chart's ServiceAccount.
        events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
        assert any(e["involvedObject"]["name"] == "qs" and e["reason"] == "AllReady" for e in events)
        # In cluster, the operator checks a scraper's token with its own ServiceAccount (the chart's
        # auth ClusterRole) against the chart's metrics-reader role.
        reader = f"soperator-slurm-operator-{namespace}-metrics-reader"
        status, metrics = scrape(metrics_port, service_account_token(namespace, "prometheus", reader))
        assert status == 200 and f'namespace="{namespace}",cluster="qs"' in metrics, status
        assert scrape(metrics_port, service_account_token(namespace, "nobody"))[0] == 403
        # Least-privilege RBAC is enough: nothing the operator asked for was refused.
        logs = kubelet.logs()
        for bad in (" ERROR ", "Traceback", "Forbidden"):
            assert bad not in logs, logs[max(0, logs.find(bad) - 300):][:4000]
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
        kubelet.stop()
        for release in ("qs", "qs-storage", "soperator"):
            subprocess.run([str(tools["helm"]), "--kubeconfig", str(control_plane.kubeconfig), "uninstall",
                            release, "-n", namespace], capture_output=True, timeout=120)
