"""Slurm's view of the workers in the CR status and the worker pods' conditions: the reconcile
against the real apiserver, reading a real slurmctld through the real slurmrestd with the operator's
own client and tokens (only the address differs: the Service is not reachable from the host)."""
from __future__ import annotations

import json

import pytest
import yaml

from soperator.kube import Kube
from soperator.node.layout import EVICTABLE_LABEL
from soperator.reconcile import reconcile
from soperator.slurm import SlurmRestClient, mint_token
from tests.kube.test_reconcile import _body, _finish_job
from tests.support.rest_slurm import NAME, REGISTERED, SPEC
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
API = "slurm.soperator.dev/v1alpha1"
# Pods that never run: the apiserver holds them, no kubelet starts them.
NOWHERE = {"nodeSelector": {"soperator.test/nowhere": "true"}}
SINFO = {"idle": "idle", "alloc": "allocated", "mix": "mixed", "drng": "draining", "drain": "drained", "down": "down"}


def connect_to(rest_slurm):
    def connect(kube, cluster, controller_ready):
        return SlurmRestClient(rest_slurm.url, lambda: mint_token(rest_slurm.key), retries=0)
    return connect


def pods_of(kube: Kube, namespace: str) -> dict[str, dict]:
    """The worker pods whole, as the apiserver holds them (`Kube.list` gives the operator's slimmed form)."""
    return {p["metadata"]["name"]: p for p in kube.list_all("v1", "Pod", [namespace])
            if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "worker"}


def _condition(pod: dict) -> dict:
    return next(c for c in pod["status"].get("conditions", []) if c["type"] == "SlurmNode")


def apply_cluster(kubectl, namespace: str, cpu_replicas: int = 2, **cpu) -> None:
    node_sets = [{**n, "scheduling": NOWHERE} for n in SPEC["nodeSets"]]
    node_sets[0].update(replicas=cpu_replicas, **{_camel(k): v for k, v in cpu.items()})
    kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": API, "kind": "SlurmCluster", "metadata": {
        "name": NAME, "namespace": namespace}, "spec": {**SPEC, "nodeSets": node_sets}}))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def start_cluster(kube: Kube, kubectl, namespace: str, connect) -> None:
    """The SlurmCluster reconciled past its populate gate, its three worker pods in the apiserver."""
    apply_cluster(kubectl, namespace)
    reconcile(kube, _body(kube, namespace, NAME), connect)
    _finish_job(kubectl, namespace, f"{NAME}-populate-jail")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    until(lambda: len(pods_of(kube, namespace)) == 3, 60, "three worker pods from two StatefulSets")


def test_status_and_pod_conditions_follow_slurm_and_survive_its_absence(api, kubectl, crd_installed, namespace,
                                                                        rest_slurm):
    kube = Kube(api)
    connect = connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)

    rest_slurm.run("scontrol", "update", f"NodeName={REGISTERED}", "State=DRAIN", "Reason=bad dimm")
    result = reconcile(kube, _body(kube, namespace, NAME), connect)
    status = _body(kube, namespace, NAME)["status"]
    sinfo = dict(line.split() for line in rest_slurm.run("sinfo", "-h", "-N", "-o", "%N %t").splitlines())
    assert sinfo == {REGISTERED: "drain"}  # the other two pods have no Slurm node: never registered
    by_set = {n["name"]: n["slurm"] for n in status["nodeSets"]}
    assert by_set["cpu"] == {**_zero(), SINFO[sinfo[REGISTERED]]: 1, "notRegistered": 1}
    assert by_set["big"] == {**_zero(), "notRegistered": 1}
    assert status["slurmNodes"] == {**_zero(), "drained": 1, "notRegistered": 2}
    assert {c.type: c.ok for c in result.conditions}["SlurmReachable"] is True
    pods = pods_of(kube, namespace)
    drained = _condition(pods[REGISTERED])
    assert (drained["status"], drained["reason"]) == ("False", "Drained") and "bad dimm" in drained["message"]
    assert {_condition(pods[p])["reason"] for p in pods if p != REGISTERED} == {"NotRegistered"}
    # The drained node's pod is the only one the workers' disruption budget lets an eviction take.
    assert {p for p, pod in pods.items() if pod["metadata"]["labels"].get(EVICTABLE_LABEL) == "true"} == {REGISTERED}

    # Nothing changed in Slurm: nothing is written.
    writes = kube.writes
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert kube.writes == writes

    # slurmrestd gone: the status says so; the counts and the pods' conditions stay as last seen.
    versions = {name: p["metadata"]["resourceVersion"] for name, p in pods_of(kube, namespace).items()}
    rest_slurm.stop_rest()
    try:
        result = reconcile(kube, _body(kube, namespace, NAME), connect)
    finally:
        rest_slurm.start_rest()
    after = _body(kube, namespace, NAME)["status"]
    reachable = next(c for c in after["conditions"] if c["type"] == "SlurmReachable")
    assert reachable["status"] == "False" and reachable["reason"] == "Unreachable", reachable
    assert after["nodeSets"] == status["nodeSets"] and after["slurmNodes"] == status["slurmNodes"]
    assert {name: p["metadata"]["resourceVersion"] for name, p in pods_of(kube, namespace).items()} == versions
    assert kube.writes == writes + 2  # the status and a Warning event, nothing else
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Unreachable" and e["type"] == "Warning" for e in events)

    # Resumed: no longer evictable.
    rest_slurm.resume(REGISTERED)
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert EVICTABLE_LABEL not in pods_of(kube, namespace)[REGISTERED]["metadata"]["labels"]


def _zero() -> dict[str, int]:
    return dict.fromkeys(["idle", "allocated", "mixed", "draining", "drained", "down", "notRegistered", "unknown"], 0)
