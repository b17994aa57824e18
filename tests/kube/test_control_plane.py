"""The test control plane is the real thing: CRD schema, subresources, controllers, GC, kubectl, helm."""
from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

from soperator import kubeyaml
from soperator.api import parse_cluster
from soperator.render.worker import worker_stateful_set
from tests.cluster.build import etcd_release, kubernetes_version
from tests.cluster.controlplane import ControlPlane, ControlPlaneError
from tests.support.wait import until
from tests.support_paths import GOOD_CRS, ROOT

pytestmark = pytest.mark.kube
GVR = ("slurm.soperator.dev", "v1alpha1", "slurmclusters")


def _manifest(name: str, **spec) -> str:
    return yaml.safe_dump({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                           "metadata": {"name": name}, "spec": spec})


def _get(kubectl, namespace, name) -> dict:
    return json.loads(kubectl("-n", namespace, "get", "slurmcluster", name, "-o", "json").stdout)


def _until(predicate, timeout=60.0):
    return until(predicate, timeout, "the controllers", interval=0.25)


def test_control_plane_components_are_running(control_plane):
    assert control_plane.dead_components() == []
    status, body = control_plane.request("/version")
    assert status == 200 and json.loads(body)["gitVersion"] == kubernetes_version()
    with urllib.request.urlopen(f"http://127.0.0.1:{control_plane.etcd_port}/version", timeout=5) as resp:
        assert json.load(resp)["etcdserver"] == etcd_release().removeprefix("v")  # built, not Debian's 3.4


def test_created_cluster_reads_back_with_defaults(kubectl, crd_installed, namespace):
    kubectl("-n", namespace, "apply", "-f", "-", input=_manifest("tiny"))
    obj = _get(kubectl, namespace, "tiny")
    spec = obj["spec"]
    assert [(n["name"], n["replicas"], n["cpus"]) for n in spec["nodeSets"]] == [("worker", 2, 1)]
    assert spec["login"]["service"]["type"] == "ClusterIP"
    assert spec["partitions"][0]["name"] == "main"
    assert spec["populateJail"]["overwrite"] is False
    # What the apiserver defaulted is exactly what our models default to.
    assert parse_cluster(obj).spec == parse_cluster({**obj, "spec": {}}).spec


def test_example_and_unusual_manifests_are_accepted(kubectl, crd_installed, namespace):
    """The examples, and the valid but unusual files (tests/data/good_crs: zero replicas, sixteen node
    sets, names at their limits, JSON, YAML words kubectl reads as booleans and numbers…), applied as
    they are written: kubectl reads the files."""
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        doc = kubeyaml.load(path.read_text())
        doc["metadata"]["namespace"] = namespace
        kubectl("apply", "-f", "-", input=json.dumps(doc))
    for path in GOOD_CRS:
        proc = kubectl("apply", "-n", namespace, "-f", str(path), check=False)
        assert proc.returncode == 0, (path.name, proc.stderr)


@pytest.mark.parametrize("spec,field,message", [
    ({"nodeSets": [{"name": "a", "replicas": -1}]}, "spec.nodeSets[0].replicas",
     "should be greater than or equal to 0"),
    ({"workers": {"replicas": 2}}, 'unknown field "spec.workers"', ""),
    ({"login": {"service": {"type": "ExternalName"}}}, "spec.login.service.type", "Unsupported value"),
    ({"nodeSets": [{"name": "a", "sharedMemorySize": "64 MB"}]}, "spec.nodeSets[0].sharedMemorySize", "should match"),
])
def test_invalid_cluster_is_rejected_by_the_apiserver(kubectl, crd_installed, namespace, spec, field, message):
    proc = kubectl("-n", namespace, "apply", "-f", "-", input=_manifest("bad", **spec), check=False)
    assert proc.returncode != 0
    assert field in proc.stderr and message in proc.stderr, proc.stderr
    assert "NotFound" in kubectl("-n", namespace, "get", "slurmcluster", "bad", check=False).stderr


def test_name_length_rule_is_enforced_by_cel(kubectl, crd_installed, namespace):
    proc = kubectl("-n", namespace, "apply", "-f", "-", input=_manifest("a" * 45), check=False)
    assert proc.returncode != 0 and "metadata.name must be at most 40 characters" in proc.stderr


def test_status_subresource_and_printer_columns(kubectl, crd_installed, namespace):
    kubectl("-n", namespace, "apply", "-f", "-", input=_manifest("shown", nodeSets=[{"name": "a", "replicas": 4}]))
    status = {"status": {"phase": "Ready", "workers": {"desired": 4, "ready": 3},
                         "slurmNodes": {"idle": 1, "allocated": 2, "drained": 0, "down": 1},
                         "loginEndpoint": "203.0.113.7:22"}}
    kubectl("-n", namespace, "patch", "slurmcluster", "shown", "--subresource=status", "--type=merge",
            "-p", json.dumps(status))
    # A status write through the main resource is ignored: status is its own subresource.
    kubectl("-n", namespace, "patch", "slurmcluster", "shown", "--type=merge", "-p",
            json.dumps({"status": {"phase": "Error"}}))
    table = kubectl("-n", namespace, "get", "slc", "shown").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "WORKERS", "DESIRED", "IDLE", "BUSY", "DRAINED", "DOWN", "LOGIN",
                                "AGE"]
    assert table[1].split()[:9] == ["shown", "Ready", "3", "4", "1", "2", "0", "1", "203.0.113.7:22"]


def test_statefulset_pods_are_created_by_the_controller_manager(kubectl, crd_installed, namespace):
    cluster = parse_cluster(yaml.safe_load(_manifest("pods", nodeSets=[{"name": "worker", "replicas": 2}])) |
                            {"metadata": {"name": "pods", "namespace": namespace}})
    kubectl("apply", "-f", "-", input=json.dumps(worker_stateful_set(cluster, cluster.spec.node_sets[0], 2)))

    def pods():
        out = kubectl("-n", namespace, "get", "pods", "-o", "name").stdout.split()
        return sorted(out) if len(out) == 2 else None

    assert _until(pods) == ["pod/pods-worker-0", "pod/pods-worker-1"]


def test_deleting_the_owner_garbage_collects_children(kubectl, crd_installed, namespace):
    kubectl("-n", namespace, "apply", "-f", "-", input=_manifest("owner"))
    uid = _get(kubectl, namespace, "owner")["metadata"]["uid"]
    child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "child", "namespace": namespace, "ownerReferences": [{
            "apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster", "name": "owner", "uid": uid,
            "controller": True, "blockOwnerDeletion": True}]}}
    kubectl("apply", "-f", "-", input=json.dumps(child))
    kubectl("-n", namespace, "delete", "slurmcluster", "owner")
    # The garbage collector picks up a new resource type on its 30 s discovery resync.
    _until(lambda: "NotFound" in kubectl("-n", namespace, "get", "configmap", "child", check=False).stderr,
           timeout=120)


def test_helm_installs_into_the_control_plane(control_plane, tools, namespace, tmp_path):
    helm = [str(tools["helm"]), "--kubeconfig", str(control_plane.kubeconfig), "-n", namespace]
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  k: v\n")
    subprocess.run([*helm, "install", "probe", str(chart)], check=True, capture_output=True, timeout=60)
    listed = json.loads(subprocess.run([*helm, "list", "-o", "json"], check=True, capture_output=True,
                                       text=True, timeout=60).stdout)
    assert [r["status"] for r in listed if r["name"] == "probe"] == ["deployed"]


def test_port_in_use_fails_fast_with_a_message(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        plane = ControlPlane(tmp_path / "cp", api_port=taken.getsockname()[1])
        started = time.monotonic()
        with pytest.raises(ControlPlaneError, match="kube-apiserver"):
            plane.start(timeout=90)
        assert time.monotonic() - started < 90
        assert plane.dead_components() == [c.name for c in plane.components]


def test_etcd_data_of_another_release_is_refused_before_anything_starts(tmp_path):
    """etcd 3.7 panics on 3.4's data; the work directory of a cluster that was never taken down keeps
    its data, and the refusal names it and the way out."""
    (tmp_path / "cp" / "etcd" / "member").mkdir(parents=True)
    plane = ControlPlane(tmp_path / "cp")
    with pytest.raises(ControlPlaneError, match=r"cp/etcd holds data of etcd an older release, not v3\.7.*down"):
        plane.start(timeout=30)
    assert plane.components == [] and not (tmp_path / "cp" / "etcd-release").exists()
    (tmp_path / "cp" / "etcd-release").write_text("v3.4.23")
    with pytest.raises(ControlPlaneError, match="holds data of etcd v3.4.23"):
        plane.start(timeout=30)
    # Another patch release of the same minor reads the data as it is.
    (tmp_path / "cp" / "etcd-release").write_text(etcd_release().rsplit(".", 1)[0] + ".0")
    plane._claim_etcd_data()
    assert (tmp_path / "cp" / "etcd-release").read_text() == etcd_release()
