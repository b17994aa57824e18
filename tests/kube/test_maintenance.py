"""Maintenance against the real apiserver and a real slurmctld, slurmd and slurmrestd: the switch
drains and holds the node set (the running job finishes, a new one waits), nothing is deleted;
switched off, only the operator's own drain is undone. An admin's drain survives both ways."""
from __future__ import annotations

import pytest

from soperator.kube import Kube
from soperator.reconcile import reconcile
from soperator.node.drains import MAINTENANCE
from tests.kube.test_reconcile import _body
from tests.kube.test_slurm_status import apply_cluster, connect_to, pods_of, start_cluster
from tests.support.rest_slurm import NAME, REGISTERED
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]


def _node(rest_slurm) -> str:
    return rest_slurm.run("scontrol", "-o", "show", "node", REGISTERED)


def test_maintenance_holds_the_node_set_and_leaves_an_admins_drain(api, kubectl, crd_installed, namespace,
                                                                     rest_slurm):
    kube = Kube(api)
    connect = connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)
    uids = {n: p["metadata"]["uid"] for n, p in pods_of(kube, namespace).items()}
    running = rest_slurm.run("sbatch", "--parsable", "-w", REGISTERED, "-o", "/tmp/job-%j.out",
                             "--wrap", "sleep 8").strip()
    until(lambda: rest_slurm.job(running)["JobState"] == "RUNNING", 30, "the job to run")

    apply_cluster(kubectl, namespace, maintenance=True)
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert f"Reason={MAINTENANCE}" in _node(rest_slurm) and "DRAIN" in _node(rest_slurm)
    later = rest_slurm.run("sbatch", "--parsable", "-p", "main", "-o", "/tmp/job-%j.out", "--wrap", "true").strip()
    until(lambda: rest_slurm.job(running)["JobState"] == "COMPLETED", 60, "the job to finish")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    held = next(c for c in _body(kube, namespace, NAME)["status"]["conditions"] if c["type"] == "Maintenance")
    assert (held["status"], held["reason"]) == ("True", "Held")
    assert rest_slurm.job(later)["JobState"] == "PENDING"
    assert {n: p["metadata"]["uid"] for n, p in pods_of(kube, namespace).items()} == uids  # nothing deleted

    apply_cluster(kubectl, namespace)
    reconcile(kube, _body(kube, namespace, NAME), connect)
    until(lambda: rest_slurm.job(later)["JobState"] == "COMPLETED", 60, "the waiting job to run")
    assert rest_slurm.job(running)["ExitCode"] == "0:0"

    # An admin's drain: left alone by maintenance on, and by maintenance off.
    rest_slurm.run("scontrol", "update", f"NodeName={REGISTERED}", "State=DRAIN", "Reason=admin: bad dimm")
    for switch in (True, False):
        apply_cluster(kubectl, namespace, maintenance=switch)
        reconcile(kube, _body(kube, namespace, NAME), connect)
        assert "Reason=admin: bad dimm" in _node(rest_slurm) and "DRAIN" in _node(rest_slurm)
