"""Kubernetes node operations become Slurm's, against the real apiserver and a real slurmctld (its
worker's slurmd registered): a Node object the test owns, the worker pod bound to it through the
binding subresource as the scheduler would, then cordoned, uncordoned, not Ready, with a condition
the admin named True, and deleted. No
kubelet runs here, so the Node's status is the test's to write (the node lifecycle controller would
only mark it Unknown after its grace period, later than these steps)."""
from __future__ import annotations

import datetime
import json

import pytest

from soperator.kube import Kube
from soperator.node.drains import KUBE_NODE
from soperator.node.layout import CORDONED_ANNOTATION
from soperator.reconcile import reconcile
from tests.kube.test_reconcile import _body
from tests.kube.test_slurm_status import NOWHERE, connect_to, pods_of, start_cluster
from tests.support.rest_slurm import NAME, REGISTERED, SPEC
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
HOST = "soperator-test-node-ops"
# Nothing else may land on it: the same control plane serves the tests that run real pods.
TAINT = {"key": "soperator.test/no-kubelet", "effect": "NoSchedule"}


def _ready(kubectl, status: str, host: str = HOST, **problems: str) -> None:
    """Ready as `status`, and each of `problems` (a condition type: its message) True, as
    node-problem-detector reports one; the conditions not given are gone."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{"type": kind, "status": value, "reason": "SoperatorTest", "message": message,
                   "lastHeartbeatTime": now, "lastTransitionTime": now}
                  for kind, value, message in (("Ready", status, ""), *((k, "True", m) for k, m in problems.items()))]
    kubectl("patch", "node", host, "--subresource=status", "--type=merge", "-p",
            json.dumps({"status": {"conditions": conditions}}))


def _bind(api, namespace: str, pod: str, host: str = HOST) -> None:
    from kubernetes import client
    client.CoreV1Api(api).create_namespaced_binding(namespace, client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod), target=client.V1ObjectReference(kind="Node", name=host)),
        _preload_content=False)  # the client cannot read the binding's reply back into a V1Binding


def test_cordon_not_ready_and_a_deleted_node_reach_slurm(api, kubectl, crd_installed, namespace, rest_slurm):
    kube, connect = Kube(api), connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)

    def slurm() -> tuple[str, str]:
        """The node's state, less sinfo's '*' for a slurmd that missed a ping, and its reason."""
        state, reason = rest_slurm.run("sinfo", "-h", "-N", "-n", REGISTERED, "-o", "%t|%E").strip().split("|")
        return state.rstrip("*"), reason

    def step(**node) -> dict:
        if node:
            kubectl("patch", "node", HOST, "--type=merge", "-p", json.dumps({"spec": node}))
        reconcile(kube, _body(kube, namespace, NAME), connect)
        return {c["type"]: c for c in _body(kube, namespace, NAME)["status"]["conditions"]}

    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": HOST},
                                                  "spec": {"taints": [TAINT]}}))
    try:
        _ready(kubectl, "True")
        _bind(api, namespace, REGISTERED)
        assert step()["KubernetesNodes"]["message"].startswith("no worker is on")
        assert slurm() == ("idle", "none")

        conditions = step(unschedulable=True)
        assert slurm() == ("drain", f"{KUBE_NODE} {HOST} cordoned")
        assert REGISTERED in conditions["KubernetesNodes"]["message"]
        step(unschedulable=False)
        assert slurm() == ("idle", "none")

        _ready(kubectl, "False")
        step()
        assert slurm() == ("drain", f"{KUBE_NODE} {HOST} not ready")  # drained only: its jobs may run on
        _ready(kubectl, "True")
        step()
        assert slurm() == ("idle", "none")

        # A condition the admin named (node-problem-detector's, say) drains while True, and only then.
        _ready(kubectl, "True", ReadonlyFilesystem="Filesystem is read-only")
        step()
        assert slurm() == ("idle", "none")
        kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
            {"spec": {"healthCheck": {"kubernetesNodeConditions": ["KernelDeadlock", "ReadonlyFilesystem"]}}}))
        step()
        assert slurm() == ("drain", f"{KUBE_NODE} {HOST} ReadonlyFilesystem: Filesystem is read-only")
        _ready(kubectl, "True")
        step()
        assert slurm() == ("idle", "none")

        # An admin's drain is neither replaced by a cordon nor undone by the uncordon.
        rest_slurm.run("scontrol", "update", f"NodeName={REGISTERED}", "State=DRAIN", "Reason=admin: fan")
        step(unschedulable=True)
        step(unschedulable=False)
        assert slurm() == ("drain", "admin: fan")
        rest_slurm.resume(REGISTERED)

        bound = pods_of(kube, namespace)[REGISTERED]["metadata"]["uid"]
        kubectl("delete", "node", HOST, "--wait=true")
        step()
        assert slurm() == ("down", f"{KUBE_NODE} {HOST} gone")
        # Kubernetes' part: the pod garbage collector deletes the pod of a node that is gone, and the
        # StatefulSet makes it again, to be placed wherever it fits.
        until(lambda: pods_of(kube, namespace).get(REGISTERED, {}).get("metadata", {}).get("uid", bound) != bound,
              180, "the pod of the deleted node made again")
        assert not pods_of(kube, namespace)[REGISTERED]["spec"].get("nodeName")
    finally:
        kubectl("delete", "node", HOST, "--ignore-not-found")
        rest_slurm.resume(REGISTERED)


def test_a_worker_on_a_node_a_named_condition_marks_bad_is_moved_drain_first(api, kubectl, crd_installed, namespace,
                                                                              rest_slurm):
    """nodeSets[].replaceUnhealthy: drained for the condition, then the node cordoned (the operator's
    annotation on it), then the pod deleted and made again by its StatefulSet; once the condition is
    gone only the operator's cordon is lifted."""
    kube, connect = Kube(api), connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)
    host = "soperator-test-node-bad"
    node_sets = [{**n, "scheduling": NOWHERE, **({"replaceUnhealthy": True} if n["name"] == "cpu" else {})}
                 for n in SPEC["nodeSets"]]
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps({"spec": {
        "nodeSets": node_sets, "healthCheck": {"kubernetesNodeConditions": ["KernelDeadlock"]}}}))

    def step() -> dict:
        reconcile(kube, _body(kube, namespace, NAME), connect)
        return {c["type"]: c for c in _body(kube, namespace, NAME)["status"]["conditions"]}

    def node() -> dict:
        return json.loads(kubectl("get", "node", host, "-o", "json").stdout)

    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": host},
                                                  "spec": {"taints": [TAINT]}}))
    try:
        _ready(kubectl, "True", host, KernelDeadlock="task blocked for more than 300 seconds")
        _bind(api, namespace, REGISTERED, host)
        bound = pods_of(kube, namespace)[REGISTERED]["metadata"]["uid"]
        replaced = step()["WorkersReplaced"]
        drained = rest_slurm.run("sinfo", "-h", "-n", REGISTERED, "-o", "%t|%E").strip()
        assert drained == f"drain|{KUBE_NODE} {host} KernelDeadlock: task blocked for more than 300 seconds"
        assert replaced["message"] == f"{REGISTERED} waits for {host} to be cordoned"
        assert node()["spec"]["unschedulable"] is True
        assert node()["metadata"]["annotations"][CORDONED_ANNOTATION] == "KernelDeadlock: task blocked for more than 300 seconds"

        replaced = step()["WorkersReplaced"]  # drained and idle: its pod goes
        assert replaced["message"] == f"{REGISTERED} moved off {host}"
        assert pods_of(kube, namespace)[REGISTERED]["metadata"].get("deletionTimestamp")
        # The kubelet's part, with none here: the containers stopped, the pod's deletion is confirmed.
        kubectl("-n", namespace, "delete", "pod", REGISTERED, "--force", "--grace-period=0")
        until(lambda: pods_of(kube, namespace).get(REGISTERED, {}).get("metadata", {}).get("uid", bound) != bound,
              60, "the pod made again by its StatefulSet")
        assert not pods_of(kube, namespace)[REGISTERED]["spec"].get("nodeName")  # not on the cordoned node
        events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
        assert {e["reason"] for e in events} >= {"Cordoned", "Replaced"}

        _ready(kubectl, "True", host)  # the condition gone: the operator's cordon, and only it, is lifted
        assert step()["WorkersReplaced"]["reason"] == "Healthy"
        assert not node()["spec"].get("unschedulable") and CORDONED_ANNOTATION not in (
            node()["metadata"].get("annotations") or {})
        kubectl("cordon", host)  # someone else's cordon stays
        step()
        assert node()["spec"]["unschedulable"] is True
    finally:
        kubectl("delete", "node", host, "--ignore-not-found")
        rest_slurm.resume(REGISTERED)
