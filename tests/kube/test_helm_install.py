"""The three charts installed with the real helm into the real control plane; the operator's RBAC is
enough to reconcile and no more; uninstalling keeps the jail."""
from __future__ import annotations

import json
import subprocess

import pytest
from kubernetes import client

from soperator.kube import Kube
from tests.kube.conftest import adopt_crd
from soperator.reconcile import reconcile
from tests.kube.test_reconcile import _finish_job
from tests.support_paths import ROOT

pytestmark = pytest.mark.kube
CHARTS = ROOT / "charts"


def _helm(control_plane, tools, *args) -> str:
    proc = subprocess.run([str(tools["helm"]), "--kubeconfig", str(control_plane.kubeconfig), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _as_service_account(control_plane, kubectl, namespace: str, name: str) -> client.ApiClient:
    token = kubectl("-n", namespace, "create", "token", name).stdout.strip()
    cfg = client.Configuration()
    cfg.host = control_plane.url
    cfg.ssl_ca_cert = str(control_plane.pki.ca_cert)
    cfg.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration=cfg)


def test_install_reconcile_with_chart_rbac_and_uninstall(control_plane, tools, kubectl, crd_installed, namespace):
    other = f"{namespace}-other"
    kubectl("create", "namespace", other)
    kubectl("-n", other, "create", "secret", "generic", "not-yours", "--from-literal=k=v")
    adopt_crd(kubectl, "ops", namespace)
    # No seccomp DaemonSet: on this machine the kubelet's directory is the test node's own, which the
    # user path gives the chart (its kubelet would write the default /var/lib/kubelet on the host).
    out = _helm(control_plane, tools, "install", "ops", str(CHARTS / "slurm-operator"), "-n", namespace,
                "--set", "seccompProfiles.install=false")
    assert "watches SlurmClusters in: " + namespace in out
    _helm(control_plane, tools, "install", "storage", str(CHARTS / "slurm-cluster-storage"), "-n", namespace,
          "--set", "clusterName=hpc")
    notes = _helm(control_plane, tools, "install", "hpc", str(CHARTS / "slurm-cluster"), "-n", namespace)
    assert "ssh root@" in notes and "sbatch" in notes

    # The operator, with the chart's ServiceAccount token, reconciles the chart's SlurmCluster.
    sa_api = _as_service_account(control_plane, kubectl, namespace, "ops-slurm-operator")
    kube = Kube(sa_api)
    body = kube.get("slurm.soperator.dev/v1alpha1", "SlurmCluster", namespace, "hpc")
    result = reconcile(kube, body)
    assert result.phase == "Populating", result
    assert kube.get("batch/v1", "Job", namespace, "hpc-populate-jail") is not None
    _finish_job(kubectl, namespace, "hpc-populate-jail")
    for _ in range(2):
        result = reconcile(kube, kube.get("slurm.soperator.dev/v1alpha1", "SlurmCluster", namespace, "hpc"))
    assert result.phase == "Provisioning", result
    assert kube.get("apps/v1", "StatefulSet", namespace, "hpc-worker") is not None
    # ...and nothing more: another namespace's Secrets are out of reach.
    with pytest.raises(client.ApiException) as denied:
        client.CoreV1Api(sa_api).read_namespaced_secret("not-yours", other)
    assert denied.value.status == 403
    can = kubectl("auth", "can-i", "list", "secrets", "-n", namespace,
                  f"--as=system:serviceaccount:{namespace}:ops-slurm-operator", check=False).stdout.strip()
    assert can == "no"

    for release in ("hpc", "storage", "ops"):
        _helm(control_plane, tools, "uninstall", release, "-n", namespace)
    claim = json.loads(kubectl("-n", namespace, "get", "pvc", "hpc-jail", "-o", "json").stdout)
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    kubectl("get", "crd", "slurmclusters.slurm.soperator.dev")  # the CRD is kept too
    kubectl("delete", "namespace", other, "--wait=false")
