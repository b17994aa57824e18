"""Scale-in never kills a job: against the real apiserver and a real slurmctld, slurmd and slurmrestd,
the reconcile drains the leaving node, holds the StatefulSet while the job runs, pauses when Slurm
cannot be asked, and lowers the StatefulSet once the node runs nothing. No new job starts there."""
from __future__ import annotations

import pytest

from soperator.kube import Kube
from soperator.reconcile import reconcile
from soperator.reconcile.scale_in import OWN_DRAIN
from tests.kube.test_reconcile import _body
from tests.kube.test_slurm_status import apply_cluster, connect_to, start_cluster
from tests.support.rest_slurm import NAME, REGISTERED
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
    assert "DRAIN" in node and f"Reason={OWN_DRAIN}" in node, node
    assert _replicas(kube, namespace) == 2
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _replicas(kube, namespace) == 2  # still running a job
    scaled = _conditions(kube, namespace)["NodeSetsScaled"]
    assert (scaled["status"], scaled["reason"]) == ("False", "Draining") and REGISTERED in scaled["message"]
    (cpu,) = [n for n in _body(kube, namespace, NAME)["status"]["nodeSets"] if n["name"] == "cpu"]
    assert cpu["scaleIn"]["replicas"] == 1 and cpu["scaleIn"]["waitingFor"] == [REGISTERED]
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
