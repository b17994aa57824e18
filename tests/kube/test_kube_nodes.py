"""Kubernetes node operations become Slurm's, against the real apiserver and a real slurmctld (its
worker's slurmd registered): a Node object the test owns, the worker pod bound to it through the
binding subresource as the scheduler would, then cordoned, uncordoned, not Ready and deleted. No
kubelet runs here, so the Node's status is the test's to write (the node lifecycle controller would
only mark it Unknown after its grace period, later than these steps)."""
from __future__ import annotations

import datetime
import json

import pytest

from soperator.kube import Kube
from soperator.node.drains import KUBE_NODE
from soperator.reconcile import reconcile
from tests.kube.test_reconcile import _body
from tests.kube.test_slurm_status import connect_to, pods_of, start_cluster
from tests.support.rest_slurm import NAME, REGISTERED
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
HOST = "soperator-test-node-ops"
# Nothing else may land on it: the same control plane serves the tests that run real pods.
TAINT = {"key": "soperator.test/no-kubelet", "effect": "NoSchedule"}


def _ready(kubectl, status: str) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    kubectl("patch", "node", HOST, "--subresource=status", "--type=merge", "-p", json.dumps({"status": {
        "conditions": [{"type": "Ready", "status": status, "reason": "SoperatorTest", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}]}}))


def _bind(api, namespace: str, pod: str) -> None:
    from kubernetes import client
    client.CoreV1Api(api).create_namespaced_binding(namespace, client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod), target=client.V1ObjectReference(kind="Node", name=HOST)),
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

        # An admin's drain is neither replaced by a cordon nor undone by the uncordon.
        rest_slurm.run("scontrol", "update", f"NodeName={REGISTERED}", "State=DRAIN", "Reason=admin: fan")
        step(unschedulable=True)
        step(unschedulable=False)
        assert slurm() == ("drain", "admin: fan")
        rest_slurm.run("scontrol", "update", f"NodeName={REGISTERED}", "State=RESUME")

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
        rest_slurm.box.run("scontrol", "update", f"NodeName={REGISTERED}", "State=RESUME")  # refused if idle
