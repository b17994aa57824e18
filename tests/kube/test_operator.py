"""`soperator run` (kopf) as a real process against the real control plane: converges, survives restarts."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from soperator.kube import Kube
from tests.cluster.controlplane import free_port
from tests.kube.test_reconcile import _create, _finish_job, _names
from tests.support_paths import ROOT

pytestmark = pytest.mark.kube


class Operator:
    def __init__(self, control_plane, workdir, namespace):
        self.log = workdir / f"operator-{time.monotonic_ns()}.log"
        self.metrics_port, self.health_port = free_port(), free_port()
        env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig), "SOPERATOR_RESYNC_SECONDS": "2",
               "SOPERATOR_METRICS_PORT": str(self.metrics_port)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "soperator.cli", "run", "-n", namespace, "--health-port", str(self.health_port)],
            cwd=ROOT, env=env, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def get(self, port: int, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.read().decode()


def _until(predicate, timeout, what, operator):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        assert operator.proc.poll() is None, operator.log.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"timed out: {what}\n{operator.log.read_text()[-3000:]}")


def test_operator_converges_and_resumes_after_restart(control_plane, api, kubectl, crd_installed, namespace,
                                                       tmp_path):
    kube = Kube(api)
    op = Operator(control_plane, tmp_path, namespace)
    try:
        _create(kubectl, namespace, "live", workers={"replicas": 2})
        _until(lambda: _names(kube, namespace, "Job", "batch/v1") == ["live-populate-jail"], 60, "populate Job", op)
        keys = kube.get("v1", "Secret", namespace, "live-munge-key")["data"]
    finally:
        op.stop()
    # Restarted mid-way: the Job finishes while no operator runs.
    _finish_job(kubectl, namespace, "live-populate-jail")
    op = Operator(control_plane, tmp_path, namespace)
    try:
        _until(lambda: len(_names(kube, namespace, "StatefulSet", "apps/v1")) == 3, 60, "StatefulSets", op)
        _until(lambda: (kube.get("slurm.soperator.dev/v1alpha1", "SlurmCluster", namespace, "live")
                        .get("status", {}).get("phase")) == "Provisioning", 30, "status", op)
        assert kube.get("v1", "Secret", namespace, "live-munge-key")["data"] == keys
        _until(lambda: 'cluster="live"' in op.get(op.metrics_port, "/metrics"), 30, "metrics", op)
        assert op.get(op.health_port, "/healthz") is not None
        body = kube.get("slurm.soperator.dev/v1alpha1", "SlurmCluster", namespace, "live")
        assert not body["metadata"].get("finalizers")
        assert not [a for a in body["metadata"].get("annotations") or {} if a.startswith("kopf.")]
    finally:
        op.stop()
