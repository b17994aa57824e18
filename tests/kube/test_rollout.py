"""An update of a node set's pod template never kills a job: against the real apiserver (its
StatefulSet controller computes the revisions) and a real slurmctld, slurmd and slurmrestd, the
reconcile drains the outdated worker, keeps its pod while the job runs, replaces it once the node runs
nothing, and resumes the node it drained. A job submitted meanwhile waits, then runs. The same for an
image and a resources change; an admin's drain is kept across an update."""
from __future__ import annotations

import pytest

from soperator.kube import Kube
from soperator.reconcile import reconcile
from soperator.node.drains import UPDATE
from tests.kube.test_reconcile import _body
from tests.kube.test_slurm_status import apply_cluster, connect_to, pods_of, start_cluster
from tests.support.rest_slurm import NAME, REGISTERED
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
NEW_IMAGE = "localhost/soperator/worker:rollout-test"


def _sts(kube: Kube, namespace: str) -> dict:
    return kube.get("apps/v1", "StatefulSet", namespace, f"{NAME}-cpu")


def _uid(kube: Kube, namespace: str, pod: str) -> str | None:
    found = pods_of(kube, namespace).get(pod)
    return found["metadata"]["uid"] if found else None


def _updated(kube: Kube, namespace: str) -> dict:
    return next(c for c in _body(kube, namespace, NAME)["status"]["conditions"] if c["type"] == "NodeSetsUpdated")


# Two kinds of update, one path: each a new pod template; `made` says the new pod has it.
UPDATES = {
    "image": ({"image": NEW_IMAGE}, lambda c: c["image"] == NEW_IMAGE),
    "resources": ({"resources": {"limits": {"memory": "3Gi"}}}, lambda c: c["resources"]["limits"]["memory"] == "3Gi"),
}


@pytest.mark.parametrize("update", sorted(UPDATES))
def test_an_update_drains_waits_for_the_job_then_replaces_the_pod(api, kubectl, crd_installed, namespace,
                                                                  rest_slurm, update):
    change, made = UPDATES[update]
    kube = Kube(api)
    connect = connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)
    assert _sts(kube, namespace)["spec"]["updateStrategy"] == {"type": "OnDelete"}
    running = rest_slurm.run("sbatch", "--parsable", "-w", REGISTERED, "-o", "/tmp/job-%j.out",
                             "--wrap", "sleep 12").strip()
    until(lambda: rest_slurm.job(running)["JobState"] == "RUNNING", 30, "the job to run")
    old_uid, old_revision = _uid(kube, namespace, REGISTERED), _sts(kube, namespace)["status"]["updateRevision"]

    # Two may be out at once here: the other pod never registers (no slurmd behind it in this harness).
    apply_cluster(kubectl, namespace, max_unavailable=2, **change)
    reconcile(kube, _body(kube, namespace, NAME), connect)
    until(lambda: _sts(kube, namespace)["status"]["updateRevision"] != old_revision, 30, "the new revision")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    node = rest_slurm.run("scontrol", "-o", "show", "node", REGISTERED)
    assert "DRAIN" in node and f"Reason={UPDATE}" in node, node
    later = rest_slurm.run("sbatch", "--parsable", "-p", "main", "-o", "/tmp/job-%j.out", "--wrap", "true").strip()
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _uid(kube, namespace, REGISTERED) == old_uid  # the job still runs: its pod stays
    assert (_updated(kube, namespace)["status"], _updated(kube, namespace)["reason"]) == ("False", "Rolling")
    assert rest_slurm.job(later)["JobState"] == "PENDING"

    until(lambda: rest_slurm.job(running)["JobState"] == "COMPLETED", 60, "the job to finish")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    until(lambda: _uid(kube, namespace, REGISTERED) not in (None, old_uid), 60, "the pod made anew")
    new_pod = pods_of(kube, namespace)[REGISTERED]
    assert made(new_pod["spec"]["containers"][0])
    # The node's record outlived the pod here (no pod ran slurmd): the operator undoes its own drain.
    reconcile(kube, _body(kube, namespace, NAME), connect)
    until(lambda: rest_slurm.job(later)["JobState"] == "COMPLETED", 60, "the waiting job to run")
    finished = rest_slurm.job(running)
    assert (finished["JobState"], finished["ExitCode"]) == ("COMPLETED", "0:0")
    reconcile(kube, _body(kube, namespace, NAME), connect)
    assert _updated(kube, namespace)["status"] == "True"


def test_an_admins_drain_is_kept_across_an_update(api, kubectl, crd_installed, namespace, rest_slurm):
    """A node someone else drained keeps its pod, its drain and its reason; the rollout says it waits."""
    kube = Kube(api)
    connect = connect_to(rest_slurm)
    start_cluster(kube, kubectl, namespace, connect)
    rest_slurm.run("scontrol", "update", f"NodeName={REGISTERED}", "State=DRAIN", "Reason=admin: bad dimm")
    uid = _uid(kube, namespace, REGISTERED)
    try:
        apply_cluster(kubectl, namespace, image=NEW_IMAGE)
        for _ in range(3):
            reconcile(kube, _body(kube, namespace, NAME), connect)
        assert _uid(kube, namespace, REGISTERED) == uid
        assert "Reason=admin: bad dimm" in rest_slurm.run("scontrol", "-o", "show", "node", REGISTERED)
        updated = _updated(kube, namespace)
        assert updated["status"] == "False" and f"drained by someone else, kept as they are: {REGISTERED}" in \
            updated["message"], updated
    finally:
        rest_slurm.resume(REGISTERED)
