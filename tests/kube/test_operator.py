"""`soperator run` (kopf) as a real process against the real control plane: converges, survives restarts."""
from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from soperator import kubeyaml
from soperator.kube import Kube
from tests.cluster.controlplane import free_port
from tests.kube.test_reconcile import _create, _finish_job, _names
from tests.support.bad_corpus import CASES
from tests.support_paths import ROOT
from tests.support.processes import stop

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
        stop(self.proc)

    def get(self, port: int, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.read().decode()

    def metrics(self, token: str | None) -> tuple[int, str]:
        return scrape(self.metrics_port, token)


def scrape(port: int, token: str | None, host: str = "127.0.0.1") -> tuple[int, str]:
    """GET https://host:port/metrics with a bearer token: (status, body)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the operator's self-signed cert
    request = urllib.request.Request(f"https://{host}:{port}/metrics",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def _until(predicate, timeout, what, operator):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        assert operator.proc.poll() is None, operator.log.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"timed out: {what}\n{operator.log.read_text()[-3000:]}")


def test_operator_converges_and_resumes_after_restart(control_plane, api, kubectl, crd_installed, namespace,
                                                       tmp_path, service_account_token):
    kube = Kube(api)
    scraper = service_account_token(namespace, "scraper", may_read_metrics=True)
    stranger = service_account_token(namespace, "stranger")
    op = Operator(control_plane, tmp_path, namespace)
    try:
        _create(kubectl, namespace, "live", nodeSets=[{"name": "worker", "replicas": 2}])
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
        _until(lambda: 'cluster="live"' in op.metrics(scraper)[1], 30, "metrics", op)
        assert op.metrics(None) == (401, "")
        assert op.metrics("not-a-token") == (401, "")
        assert op.metrics(stranger) == (403, "")
        with pytest.raises(OSError):  # no plain HTTP: tokens never travel in clear
            op.get(op.metrics_port, "/metrics")
        assert op.get(op.health_port, "/healthz") is not None
        body = kube.get("slurm.soperator.dev/v1alpha1", "SlurmCluster", namespace, "live")
        assert not body["metadata"].get("finalizers")
        assert not [a for a in body["metadata"].get("annotations") or {} if a.startswith("kopf.")]
    finally:
        op.stop()


def test_operator_refuses_what_the_apiserver_lets_through(control_plane, api, kubectl, crd_installed, namespace,
                                                          tmp_path):
    """Every corpus case the CRD schema cannot refuse exists in the cluster; the running operator
    marks each SpecValid=False naming the field, posts an InvalidSpec event and creates nothing."""
    kube = Kube(api)
    cases = {f"bad-{i}": case for i, case in enumerate(c for c in CASES if c.api == "accepts")}
    assert len(cases) >= 6
    for name, case in cases.items():
        doc = kubeyaml.load(case.path.read_text())
        doc["metadata"] = {"name": name, "namespace": namespace}
        kubectl("apply", "-f", "-", input=json.dumps(doc))

    def refused(name: str) -> str | None:
        status = kube.get("slurm.soperator.dev/v1alpha1", "SlurmCluster", namespace, name).get("status") or {}
        cond = [c for c in status.get("conditions", []) if c["type"] == "SpecValid"]
        return cond[0]["message"] if cond and cond[0]["status"] == "False" else None

    op = Operator(control_plane, tmp_path, namespace)
    try:
        _until(lambda: all(refused(n) for n in cases), 60, "every bad cluster marked SpecValid=False", op)
    finally:
        op.stop()
    for name, case in cases.items():
        assert f"{case.error_at}: " in refused(name), (case.name, refused(name))
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert {e["involvedObject"]["name"] for e in events if e["reason"] == "InvalidSpec"} == set(cases)
    for kind, api_version in (("Secret", "v1"), ("ConfigMap", "v1"), ("Service", "v1"), ("Job", "batch/v1"),
                              ("StatefulSet", "apps/v1")):
        assert _names(kube, namespace, kind, api_version) == [], kind
    assert "Traceback" not in op.log.read_text()
