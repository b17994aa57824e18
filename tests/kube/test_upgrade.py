"""The in-place upgrade against the real apiserver (its StatefulSet controller makes and revises the
pods; no kubelet runs them here, so a test marks a pod Ready as a kubelet would): parts move in
Slurm's order, a waiting part keeps its release, image and config, the status says who runs what;
a downgrade is refused with a condition and an event, and nothing is written."""
from __future__ import annotations

import json

import pytest

from soperator.api.releases import image_tag
from soperator.kube import Kube
from soperator.node.layout import SLURM_RELEASE_LABEL
from soperator.reconcile import reconcile
from tests.kube.test_reconcile import _body, _create, _finish_job
from tests.support.wait import until

pytestmark = pytest.mark.kube
OLD, NEW = "24.11", "26.05"
# No image of this registry is on the node: the kubelet never starts these pods' containers, so the
# pod statuses the tests write stand. With the images present (a test before this one imported them),
# slurmdbd's readiness probe would set Ready back to False under the test.
REGISTRY = "localhost/soperator-absent"
IMAGES = {"registry": REGISTRY}


@pytest.fixture
def kube(api) -> Kube:
    return Kube(api)


@pytest.fixture(autouse=True)
def no_kubelet_runs_the_pods(kubectl):
    """Every node cordoned for the test, so the pods stay unscheduled and the statuses the test writes
    stand. With the real node up (an earlier module started it), its kubelet took the pods, failed to
    pull their absent images and set Ready back to False under the test (seen in a CI run)."""
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    cordoned = [n["metadata"]["name"] for n in nodes if not n["spec"].get("unschedulable")]
    for name in cordoned:
        kubectl("cordon", name)
    yield
    for name in cordoned:
        kubectl("uncordon", name)


def _sts(kube: Kube, namespace: str, name: str) -> dict:
    return kube.get("apps/v1", "StatefulSet", namespace, name)


def _template(kube: Kube, namespace: str, name: str) -> tuple[str, str]:
    """(the release its pods are made for, its first container's image)."""
    template = _sts(kube, namespace, name)["spec"]["template"]
    return template["metadata"]["labels"][SLURM_RELEASE_LABEL], template["spec"]["containers"][0]["image"]


def _mark_ready(kubectl, namespace: str, pod: str) -> None:
    kubectl("-n", namespace, "patch", "pod", pod, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}))


def _pod(kube: Kube, namespace: str, name: str) -> dict | None:
    return kube.get("v1", "Pod", namespace, name)


def _settle(kube, kubectl, namespace: str, sts: str) -> None:
    """The StatefulSet's pod on its current revision and Ready. The StatefulSet controller must have
    seen the new template first: till then its updateRevision is the old one, which the old pod
    matches (seen with a busy controller-manager: the old pod taken for the new, then deleted)."""
    observed = lambda: (_sts(kube, namespace, sts)["status"].get("observedGeneration")  # noqa: E731
                        == _sts(kube, namespace, sts)["metadata"]["generation"])
    until(observed, 30, f"{sts}'s new template seen")
    revision = lambda: _sts(kube, namespace, sts)["status"].get("updateRevision")  # noqa: E731
    until(lambda: revision() and ((_pod(kube, namespace, f"{sts}-0") or {}).get("metadata", {}).get("labels", {})
                                  .get("controller-revision-hash") == revision()), 60, f"{sts}-0 on its revision")
    _mark_ready(kubectl, namespace, f"{sts}-0")
    until(observed, 30, f"{sts} observed")


def _cond(kube, namespace, name) -> dict:
    return next(c for c in _body(kube, namespace, name)["status"]["conditions"] if c["type"] == "SlurmUpgraded")


def test_parts_move_in_order_and_a_waiting_part_keeps_its_release(kube, kubectl, crd_installed, namespace):
    _create(kubectl, namespace, "up", slurmVersion=OLD, nodeSets=[{"name": "cpu", "replicas": 1}], images=IMAGES,
            login={"replicas": 1})
    reconcile(kube, _body(kube, namespace, "up"))
    _finish_job(kubectl, namespace, "up-populate-jail")
    reconcile(kube, _body(kube, namespace, "up"))
    for sts in ("up-controller", "up-cpu", "up-login"):
        assert _template(kube, namespace, sts) == (OLD, f"{REGISTRY}/{sts.split('-')[1]}:{image_tag(OLD)}"
                                                   .replace("/cpu:", "/worker:"))
        _settle(kube, kubectl, namespace, sts)
    reconcile(kube, _body(kube, namespace, "up"))
    assert (_cond(kube, namespace, "up")["status"], _cond(kube, namespace, "up")["reason"]) == ("True", "Current")

    kubectl("-n", namespace, "patch", "slurmcluster", "up", "--type=merge", "-p", json.dumps({"spec": {"slurmVersion": NEW}}))
    reconcile(kube, _body(kube, namespace, "up"))
    # No accounting: slurmctld first; the workers and login keep 24.11, and so does slurm.conf.
    assert _template(kube, namespace, "up-controller")[0] == NEW
    assert _template(kube, namespace, "up-cpu") == (OLD, f"{REGISTRY}/worker:{image_tag(OLD)}")
    assert _template(kube, namespace, "up-login")[0] == OLD
    conf = kube.get("v1", "ConfigMap", namespace, "up-slurm-configs")["data"]["slurm.conf"]
    assert "MetricsType" not in conf
    cond = _cond(kube, namespace, "up")
    assert (cond["status"], cond["reason"]) == ("False", "Upgrading") and "slurmctld" in cond["message"]
    assert _body(kube, namespace, "up")["status"]["slurmRelease"]["wanted"] == NEW

    _settle(kube, kubectl, namespace, "up-controller")  # the StatefulSet controller replaced the pod
    assert _pod(kube, namespace, "up-controller-0")["metadata"]["labels"][SLURM_RELEASE_LABEL] == NEW
    reconcile(kube, _body(kube, namespace, "up"))
    # slurmctld runs 26.05: the workers' template moves (their pods are replaced drain-first, by the
    # rollout, not here: no Slurm answers in this test); login still waits.
    assert _template(kube, namespace, "up-cpu") == (NEW, f"{REGISTRY}/worker:{image_tag(NEW)}")
    assert _template(kube, namespace, "up-login")[0] == OLD
    reconcile(kube, _body(kube, namespace, "up"))  # the status tells what a pass saw as it began
    status = _body(kube, namespace, "up")["status"]["slurmRelease"]
    assert status == {"wanted": NEW, "config": OLD, "controller": [NEW], "workers": [OLD, NEW], "login": [OLD],
                      "jail": [OLD]}  # the populate Job that filled it was 24.11's


def test_a_downgrade_is_refused_and_nothing_changes(kube, kubectl, crd_installed, namespace):
    _create(kubectl, namespace, "dn", nodeSets=[{"name": "cpu", "replicas": 1}], images=IMAGES)
    reconcile(kube, _body(kube, namespace, "dn"))
    _finish_job(kubectl, namespace, "dn-populate-jail")
    reconcile(kube, _body(kube, namespace, "dn"))
    # generation counts spec changes; the resourceVersion also moves when the StatefulSet controller
    # writes its status, which may come late on a busy machine (seen: dn-cpu's, after its pod was made).
    versions = {sts: _sts(kube, namespace, sts)["metadata"]["generation"] for sts in ("dn-controller", "dn-cpu")}
    config = kube.get("v1", "ConfigMap", namespace, "dn-slurm-configs")["metadata"]["resourceVersion"]

    kubectl("-n", namespace, "patch", "slurmcluster", "dn", "--type=merge", "-p", json.dumps({"spec": {"slurmVersion": OLD}}))
    before = kube.writes
    result = reconcile(kube, _body(kube, namespace, "dn"))
    assert result.phase == "Error"
    cond = _cond(kube, namespace, "dn")
    assert (cond["status"], cond["reason"]) == ("False", "UpgradeRefused")
    assert f"downgrade from Slurm {NEW} to {OLD}" in cond["message"]
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "UpgradeRefused" and e["type"] == "Warning" and NEW in e["message"] and OLD in e["message"]
               for e in events)
    # The status patch and the event only: no child written.
    assert kube.writes - before <= 2
    assert {sts: _sts(kube, namespace, sts)["metadata"]["generation"] for sts in versions} == versions
    assert kube.get("v1", "ConfigMap", namespace, "dn-slurm-configs")["metadata"]["resourceVersion"] == config


def test_slurm_conf_keeps_naming_slurmdbd_while_it_restarts(kube, kubectl, crd_installed, namespace):
    """slurmdbd first answers: slurm.conf names it. slurmdbd goes away (its upgrade, a rescheduled pod):
    slurm.conf keeps naming it, since slurmctld keeps the records for it meanwhile; a config without it
    would lose them (and reconfigure slurmctld twice)."""
    _create(kubectl, namespace, "acct", nodeSets=[{"name": "cpu", "replicas": 1}], accounting={"enabled": True},
            images=IMAGES)
    reconcile(kube, _body(kube, namespace, "acct"))
    _finish_job(kubectl, namespace, "acct-populate-jail")
    conf = lambda: kube.get("v1", "ConfigMap", namespace, "acct-slurm-configs")["data"]["slurm.conf"]  # noqa: E731
    reconcile(kube, _body(kube, namespace, "acct"))
    assert "AccountingStorageType" not in conf()  # never answered yet
    for sts in ("acct-slurmdbd", "acct-database"):
        _settle(kube, kubectl, namespace, sts)
        until(lambda: (_sts(kube, namespace, sts)["status"].get("readyReplicas") or 0) == 1, 30, f"{sts} ready")
    reconcile(kube, _body(kube, namespace, "acct"))
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf()

    kubectl("-n", namespace, "delete", "pod", "acct-slurmdbd-0", "--wait=false")
    until(lambda: (_sts(kube, namespace, "acct-slurmdbd")["status"].get("readyReplicas") or 0) == 0, 60,
          "slurmdbd not ready")
    reconcile(kube, _body(kube, namespace, "acct"))
    cond = next(c for c in _body(kube, namespace, "acct")["status"]["conditions"] if c["type"] == "AccountingReady")
    assert cond["status"] == "False"
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf()
