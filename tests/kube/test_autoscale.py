"""Elastic node sets against the real apiserver and a real slurmctld and slurmrestd: Slurm's power
saving asks for nodes, the reconcile sizes the StatefulSet, and nothing changes the CR. No kubelet
runs the pods here: the test starts a node's slurmd in the Slurm sandbox as its pod would, once the
StatefulSet has the pod, and stops it when the StatefulSet lets the pod go."""
from __future__ import annotations

import time

import pytest
import yaml

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.kube import Kube
from soperator.node.drains import SCALE_IN, START_FAILED
from soperator.reconcile import reconcile
from soperator.render.configs import controller_host, slurm_files
from tests.conftest import make_cluster
from tests.kube.test_reconcile import _body, _finish_job
from tests.kube.test_slurm_status import NOWHERE, connect_to, pods_of
from tests.support.rest_slurm import RestSlurm, reached
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
API = "slurm.soperator.dev/v1alpha1"
NAME = "elastic"
IDLE = 10  # autoscale.idleSeconds: the least the API takes
SPEC = {"nodeSets": [{"name": "cpu", "autoscale": {"max": 2, "idleSeconds": IDLE}}],
        "partitions": [{"name": "main", "default": True}],
        "slurmConfig": {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                        "extra": {"SchedulerParameters": "batch_sched_delay=0"}}}
FIRST, SECOND = f"{NAME}-cpu-0", f"{NAME}-cpu-1"


@pytest.fixture(scope="module")
def elastic_slurm(tmp_path_factory):
    """slurmctld and slurmrestd with the cluster's rendered slurm.conf: CLOUD records, no slurmd."""
    cluster = make_cluster(name=NAME, **SPEC)
    key = generate_jwt_key()
    work = tmp_path_factory.mktemp("elastic-slurm")
    box = SlurmSandbox(work, slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                       names=[FIRST, SECOND], jwt_key=key, rest=True, jail=make_thin_jail(work / "jail"), cloud=True)
    with reached(box, key, cluster) as slurm:
        yield slurm


def _apply(kubectl, namespace: str, **autoscale) -> None:
    node_sets = [{**n, "scheduling": NOWHERE, "autoscale": {**n["autoscale"], **autoscale}} for n in SPEC["nodeSets"]]
    kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": API, "kind": "SlurmCluster", "metadata": {
        "name": NAME, "namespace": namespace}, "spec": {**SPEC, "nodeSets": node_sets}}))


def _state(slurm: RestSlurm, node: str) -> dict[str, str]:
    text = slurm.run("scontrol", "-o", "show", "node", node)
    return dict(f.split("=", 1) for f in text.split() if "=" in f)


def _reason(slurm: RestSlurm, node: str) -> str:
    return slurm.run("sinfo", "-h", "-N", "-n", node, "-o", "%E").strip()


def _replicas(kube: Kube, namespace: str) -> int:
    return kube.get("apps/v1", "StatefulSet", namespace, f"{NAME}-cpu")["spec"]["replicas"]


def _status(kube: Kube, namespace: str) -> dict:
    body = _body(kube, namespace, NAME)
    (cpu,) = body["status"]["nodeSets"]
    return {"autoscale": cpu["autoscale"], "conditions": {c["type"]: c for c in body["status"]["conditions"]}}


def _pass(kube: Kube, namespace: str, connect) -> None:
    reconcile(kube, _body(kube, namespace, NAME), connect)


def test_a_job_grows_the_node_set_and_idle_nodes_go_back_to_powered_down(api, kubectl, crd_installed, namespace,
                                                                          elastic_slurm):
    kube, slurm, connect = Kube(api), elastic_slurm, connect_to(elastic_slurm)
    _apply(kubectl, namespace)
    _pass(kube, namespace, connect)
    _finish_job(kubectl, namespace, f"{NAME}-populate-jail")
    _pass(kube, namespace, connect)
    generation = _body(kube, namespace, NAME)["metadata"]["generation"]
    # From zero: Slurm holds both records powered down, the StatefulSet has no pod.
    assert _replicas(kube, namespace) == 0
    assert {n: _state(slurm, n)["State"] for n in (FIRST, SECOND)} == dict.fromkeys((FIRST, SECOND), "IDLE+CLOUD+POWERED_DOWN")
    status = _status(kube, namespace)
    assert status["autoscale"]["poweredDown"] == 2 and status["autoscale"]["replicas"] == 0

    # An admin's drain of a powered-down node: no job goes there, and it survives every step below.
    slurm.run("scontrol", "update", f"NodeName={SECOND}", "State=DRAIN", "Reason=admin: bad fan")

    # A job needs a node: Slurm powers one up, the reconcile gives it a pod.
    job = slurm.run("sbatch", "--parsable", "-o", "/tmp/job-%j.out", "--wrap", "sleep 1").strip()
    until(lambda: "POWERING_UP" in _state(slurm, FIRST)["State"], 30, "Slurm to power up a node for the job")
    _pass(kube, namespace, connect)
    assert _replicas(kube, namespace) == 1
    status = _status(kube, namespace)
    assert status["autoscale"]["poweringUp"] == [FIRST] and "jobs wait" in status["autoscale"]["message"]
    assert status["conditions"]["Autoscaled"]["reason"] == "Growing"
    until(lambda: FIRST in pods_of(kube, namespace), 60, "the StatefulSet's pod")
    slurm.box.start_cloud_slurmd(FIRST)  # as the pod's container would
    finished = slurm.box.wait_job(job, 60)
    assert (finished["JobState"], finished["NodeList"], finished["ExitCode"]) == ("COMPLETED", FIRST, "0:0")

    # A job that runs through the idle time keeps its node: no drain, no release.
    job = slurm.run("sbatch", "--parsable", "-o", "/tmp/job-%j.out", "--wrap", f"sleep {IDLE + 6}").strip()
    until(lambda: slurm.job(job)["JobState"] == "RUNNING", 30, "the long job to run")
    time.sleep(IDLE + 1)
    _pass(kube, namespace, connect)
    assert _replicas(kube, namespace) == 1 and "DRAIN" not in _state(slurm, FIRST)["State"]
    assert slurm.box.wait_job(job, 60)["JobState"] == "COMPLETED"

    # Idle for the idle time: released (_release).
    _pass(kube, namespace, connect)
    assert _replicas(kube, namespace) == 1  # idle for less than IDLE since that job
    assert FIRST in _status(kube, namespace)["autoscale"]["idleSince"]
    _release(kube, kubectl, namespace, slurm, connect)

    # And back: the next job resumes the same record.
    job = slurm.run("sbatch", "--parsable", "-o", "/tmp/job-%j.out", "--wrap", "true").strip()
    until(lambda: "POWERING_UP" in _state(slurm, FIRST)["State"], 30, "Slurm to power the node up again")
    _pass(kube, namespace, connect)
    assert _replicas(kube, namespace) == 1
    until(lambda: FIRST in pods_of(kube, namespace), 60, "the StatefulSet's pod")
    slurm.box.start_cloud_slurmd(FIRST)
    assert slurm.box.wait_job(job, 60)["JobState"] == "COMPLETED"
    _release(kube, kubectl, namespace, slurm, connect)

    # A worker that does not start within the node set's resumeTimeout (here no slurmd comes for its
    # pod) is given up: its record set down with the operator's reason, the job requeued by Slurm; then
    # its pod goes and the record is powered down, idle for the next try.
    _apply(kubectl, namespace, resumeTimeout=10)
    job = slurm.run("sbatch", "--parsable", "-o", "/tmp/job-%j.out", "--wrap", "true").strip()
    until(lambda: "POWERING_UP" in _state(slurm, FIRST)["State"], 30, "Slurm to power the node up for the job")
    _pass(kube, namespace, connect)
    until(lambda: FIRST in pods_of(kube, namespace), 60, "the StatefulSet's pod")
    time.sleep(11)
    _pass(kube, namespace, connect)
    state = _state(slurm, FIRST)
    assert state["State"].startswith("DOWN") and _reason(slurm, FIRST).startswith(f"{START_FAILED} in 10s: "), state
    autoscaled = _status(kube, namespace)["conditions"]["Autoscaled"]
    assert (autoscaled["status"], autoscaled["reason"]) == ("False", "StartFailed"), autoscaled
    requeued = slurm.job(job)
    assert (requeued["JobState"], requeued["Restarts"]) == ("PENDING", "1"), requeued
    slurm.run("scancel", job)
    _pass(kube, namespace, connect)
    assert _replicas(kube, namespace) == 0
    until(lambda: FIRST not in pods_of(kube, namespace), 60, "the given-up pod to go")
    _pass(kube, namespace, connect)
    until(lambda: _state(slurm, FIRST)["State"] == "IDLE+CLOUD+POWERED_DOWN", 40, "the record to power down")

    # min: 1 from zero: the operator powers the record up itself before its pod starts, and keeps
    # the worker whatever the idle time. The admin's drain is still there.
    _apply(kubectl, namespace, min=1)
    _pass(kube, namespace, connect)
    # The request (POWER_UP), or already Slurm's next second's doing (POWERING_UP).
    assert _replicas(kube, namespace) == 1 and {"POWER_UP", "POWERING_UP"} & set(_state(slurm, FIRST)["State"].split("+"))
    until(lambda: "POWERING_UP" in _state(slurm, FIRST)["State"], 30, "Slurm to act on the power up")
    until(lambda: FIRST in pods_of(kube, namespace), 60, "the StatefulSet's pod")
    slurm.box.start_cloud_slurmd(FIRST)
    until(lambda: _state(slurm, FIRST)["State"] == "IDLE+CLOUD", 30, "the node to register")
    time.sleep(IDLE + 1)
    _pass(kube, namespace, connect)
    _pass(kube, namespace, connect)
    assert _replicas(kube, namespace) == 1 and _state(slurm, FIRST)["State"] == "IDLE+CLOUD"
    assert _status(kube, namespace)["autoscale"]["message"].startswith("at min (1)")
    second = _state(slurm, SECOND)
    assert "DRAIN" in second["State"] and _reason(slurm, SECOND) == "admin: bad fan", second
    # Nothing but the test's own two changes (resumeTimeout, then min) touched the CR.
    assert _body(kube, namespace, NAME)["metadata"]["generation"] == generation + 2

    # Switched to a fixed size while it has a worker: refused, with the field named, and nothing changed
    # (its records would meet the dynamic nodes of the same names).
    conf = kube.get("v1", "ConfigMap", namespace, f"{NAME}-slurm-configs")["data"]["slurm.conf"]
    fixed = [{k: v for k, v in n.items() if k != "autoscale"} | {"replicas": 1, "scheduling": NOWHERE}
             for n in SPEC["nodeSets"]]
    kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": API, "kind": "SlurmCluster", "metadata": {
        "name": NAME, "namespace": namespace}, "spec": {**SPEC, "nodeSets": fixed}}))
    _pass(kube, namespace, connect)
    valid = _status(kube, namespace)["conditions"]["SpecValid"]
    assert (valid["status"], valid["reason"]) == ("False", "NodeSetModeChange"), valid
    assert valid["message"].startswith("spec.nodeSets[0].autoscale: node set cpu runs workers sized by autoscale")
    assert kube.get("v1", "ConfigMap", namespace, f"{NAME}-slurm-configs")["data"]["slurm.conf"] == conf
    slurm.box.stop_slurmd()


def _release(kube: Kube, kubectl, namespace: str, slurm: RestSlurm, connect) -> None:
    """Idle for the idle time: the node drained first, released, then powered down once its pod is gone."""
    time.sleep(IDLE + 1)
    _pass(kube, namespace, connect)
    state = _state(slurm, FIRST)
    assert "DRAIN" in state["State"] and _reason(slurm, FIRST).startswith(SCALE_IN), state
    _pass(kube, namespace, connect)
    assert _replicas(kube, namespace) == 0
    until(lambda: FIRST not in pods_of(kube, namespace), 60, "the released pod to go")
    slurm.box.stop_slurmd()
    _pass(kube, namespace, connect)
    until(lambda: _state(slurm, FIRST)["State"] == "IDLE+CLOUD+POWERED_DOWN", 40, "the record to power down")
    _pass(kube, namespace, connect)
    assert _status(kube, namespace)["autoscale"]["replicas"] == 0
