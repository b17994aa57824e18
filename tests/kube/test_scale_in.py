"""Scale-in never kills a job: against the real apiserver and a real slurmctld, slurmd and slurmrestd,
the reconcile drains the leaving node, holds the StatefulSet while the job runs, pauses when Slurm
cannot be asked, and lowers the StatefulSet once the node runs nothing. No new job starts there."""
from __future__ import annotations

import json
import time

import pytest
import yaml

from soperator.kube import Kube
from soperator.reconcile import reconcile
from soperator.node.drains import SCALE_IN
from tests.kube.test_reconcile import _body
from tests.kube.test_slurm_status import NOWHERE, apply_cluster, connect_to, start_cluster
from tests.support.rest_slurm import NAME, REGISTERED, SPEC
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]


def _replicas(kube: Kube, namespace: str) -> int:
    return kube.get("apps/v1", "StatefulSet", namespace, f"{NAME}-cpu")["spec"]["replicas"]


def _conditions(kube: Kube, namespace: str) -> dict[str, dict]:
    return {c["type"]: c for c in _body(kube, namespace, NAME)["status"]["conditions"]}


def test_scale_in_drains_waits_for_the_job_and_pauses_without_slurm(api, kubectl, crd_installed, namespace,
                                                                     rest_slurm):
    kube = Kube(api)
    connect = connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)
    running = rest_slurm.run("sbatch", "--parsable", "-w", REGISTERED, "-o", "/tmp/job-%j.out",
                             "--wrap", "sleep 12").strip()
    until(lambda: rest_slurm.job(running)["JobState"] == "RUNNING", 30, "the job to run")

    # cpu 2 -> 1: the leaving node (the highest ordinal) is drained by the operator, the StatefulSet kept.
    apply_cluster(kubectl, namespace, cpu_replicas=1)
    reconcile(kube, _body(kube, namespace, NAME), connect)
    node = rest_slurm.run("scontrol", "-o", "show", "node", REGISTERED)
    assert "DRAIN" in node and f"Reason={SCALE_IN}" in node, node
    assert _replicas(kube, namespace) == 2
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _replicas(kube, namespace) == 2  # still running a job
    scaled = _conditions(kube, namespace)["NodeSetsScaled"]
    assert (scaled["status"], scaled["reason"]) == ("False", "Draining") and REGISTERED in scaled["message"]
    (cpu,) = [n for n in _body(kube, namespace, NAME)["status"]["nodeSets"] if n["name"] == "cpu"]
    assert cpu["scaleIn"]["replicas"] == 1 and cpu["scaleIn"]["waitingFor"] == [REGISTERED]
    assert cpu["scaleIn"]["jobs"] == 1 and f"1 job(s): {running}" in scaled["message"]
    # No new job starts on the draining node.
    later = rest_slurm.run("sbatch", "--parsable", "-p", "main", "-o", "/tmp/job-%j.out", "--wrap", "true").strip()

    # slurmrestd gone while the job ends: nothing is removed on a guess.
    rest_slurm.stop_rest()
    try:
        until(lambda: rest_slurm.job(running)["JobState"] == "COMPLETED", 60, "the job to finish")
        reconcile(kube, _body(kube, namespace, NAME), connect)
        assert _replicas(kube, namespace) == 2
        assert _conditions(kube, namespace)["NodeSetsScaled"]["reason"] == "Paused"
    finally:
        rest_slurm.start_rest()

    # Slurm back: the node runs nothing, the StatefulSet goes down to the spec's count.
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _replicas(kube, namespace) == 1
    assert _conditions(kube, namespace)["NodeSetsScaled"]["status"] == "True"
    finished = rest_slurm.job(running)
    assert (finished["JobState"], finished["ExitCode"]) == ("COMPLETED", "0:0")
    assert rest_slurm.job(later)["JobState"] == "PENDING"
    rest_slurm.run("scancel", later)


def _started_with_a_job(api, kubectl, namespace: str, rest_slurm, command: str):
    """The cluster reconciled with its pods, and a job running on REGISTERED: (kube, connect, job id)."""
    kube = Kube(api)
    connect = connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)
    job = rest_slurm.run("sbatch", "--parsable", "-w", REGISTERED, "-o", "/dev/null", "--wrap", command).strip()
    until(lambda: rest_slurm.job(job)["JobState"] == "RUNNING", 30, "the job to run")
    return kube, connect, job


def _drain_age(connect) -> float:
    """Seconds since the operator's drain of REGISTERED, by Slurm's clock (the deadline's own)."""
    (node,) = [n for n in connect(None, None, True).list_nodes() if n.name == REGISTERED]
    return time.time() - node.reason_changed_at


def test_drain_timeout_warns_or_cancels_as_the_spec_says(api, kubectl, crd_installed, namespace, rest_slurm):
    kube, connect, job = _started_with_a_job(api, kubectl, namespace, rest_slurm, "sleep 300")

    # Warn: past the deadline the job runs on, the StatefulSet stays, the condition and an event say so.
    apply_cluster(kubectl, namespace, cpu_replicas=1, drain_timeout={"afterSeconds": 3, "action": "Warn"})
    reconcile(kube, _body(kube, namespace, NAME), connect)
    until(lambda: _drain_age(connect) > 4, 30, "the deadline to pass")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    scaled = _conditions(kube, namespace)["NodeSetsScaled"]
    assert scaled["reason"] == "DrainTimedOut" and REGISTERED in scaled["message"], scaled
    assert rest_slurm.job(job)["JobState"] == "RUNNING" and _replicas(kube, namespace) == 2

    # Cancel: the job is cancelled, as scancel does; the next pass lowers the StatefulSet.
    apply_cluster(kubectl, namespace, cpu_replicas=1, drain_timeout={"afterSeconds": 3, "action": "Cancel"})
    reconcile(kube, _body(kube, namespace, NAME), connect)
    scaled = _conditions(kube, namespace)["NodeSetsScaled"]
    assert scaled["reason"] == "DrainTimeoutCancelled" and f"cpu: {job}" in scaled["message"], scaled
    until(lambda: rest_slurm.job(job)["JobState"] == "CANCELLED", 60, "the job to be cancelled")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _replicas(kube, namespace) == 1
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert {"DrainTimedOut", "DrainTimeoutCancelled"} <= {e["reason"] for e in events if e["type"] == "Warning"}


def test_a_removed_node_set_is_drained_waited_for_then_deleted(api, kubectl, crd_installed, namespace, rest_slurm):
    kube, connect, job = _started_with_a_job(api, kubectl, namespace, rest_slurm, "sleep 10")

    # Node set cpu taken out of the spec (main spans big only now).
    kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": "slurm.soperator.dev/v1alpha1",
        "kind": "SlurmCluster", "metadata": {"name": NAME, "namespace": namespace},
        "spec": {**SPEC, "nodeSets": [{**SPEC["nodeSets"][1], "scheduling": NOWHERE}]}}))
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert f"Reason={SCALE_IN}" in rest_slurm.run("scontrol", "-o", "show", "node", REGISTERED)
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _replicas(kube, namespace) == 2 and rest_slurm.job(job)["JobState"] == "RUNNING"
    assert "cpu: scale-in 2 -> 0" in _conditions(kube, namespace)["NodeSetsScaled"]["message"]

    until(lambda: rest_slurm.job(job)["JobState"] == "COMPLETED", 60, "the job to finish")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _replicas(kube, namespace) == 0

    def deleted() -> bool:
        reconcile(kube, _body(kube, namespace, NAME), connect)
        return kube.get("apps/v1", "StatefulSet", namespace, f"{NAME}-cpu") is None
    until(deleted, 60, "the removed node set's StatefulSet to be deleted once its pods are gone")
    assert rest_slurm.job(job)["ExitCode"] == "0:0"
    assert kube.get("apps/v1", "StatefulSet", namespace, f"{NAME}-big")["spec"]["replicas"] == 1
