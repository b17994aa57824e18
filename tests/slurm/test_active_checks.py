"""Active health checks on the real slurmctld, slurmrestd and slurmd (26.05) with the jail plugin: the
operator's planner (reconcile/checks.py) and its REST client submit each round's job, read its end
back and drain on failure, as a reconcile pass does (tests/kube/test_checks.py has the status and
events). The check is a program in the jail, run as root there, alone on its node."""
from __future__ import annotations

import time

import pytest

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.node.drains import ACTIVE_CHECK
from soperator.reconcile.checks import CheckPlan, plan_checks
from soperator.reconcile.conditions import Cond
from soperator.reconcile.node_actions import act_on_checks
from soperator.reconcile.slurm_view import Observation
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from soperator.slurm import SlurmRestClient, mint_token
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail, reach_slurmctld_from
from tests.support.wait import until

pytestmark = pytest.mark.slurm
NODE = "chk-cpu-0"
# Fails while /opt/checks/fail exists in the jail; says where it ran either way.
PROBE = """#!/bin/sh
echo "on $(cat /jail-marker) as $(id -u)"
if [ -e /opt/checks/fail ]; then echo "checking gpus"; echo "gpu 3: xid 79"; exit 1; fi
"""


def _round(client: SlurmRestClient, cluster, status: list[dict], now: float):
    """One pass's part: plan, submit, drain; returns the plan with its jobs recorded."""
    plan = plan_checks(cluster, {n.name: n for n in client.list_nodes()}, client.list_jobs(), status, now)
    for _, _, job in plan.cancel:
        client.cancel_job(job)
    for step in plan.submit:
        plan.status[0]["running"][step.node] = client.submit_job(step.script, step.job)
    for node, reason in plan.drain.items():
        client.drain(node, reason)
    return plan


def test_a_check_job_runs_in_the_jail_as_root_and_its_failure_drains_with_its_last_line(tmp_path):
    cluster = make_cluster(name="chk", nodeSets=[{"name": "cpu", "replicas": 1}], healthCheck={"active": [
        {"name": "probe", "program": "/opt/checks/probe", "everySeconds": 10}]}, slurmConfig={
        "proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    jail = make_thin_jail(tmp_path / "jail")
    (jail / "opt" / "checks").mkdir(parents=True)
    (jail / "opt" / "checks" / "probe").write_text(PROBE)
    (jail / "opt" / "checks" / "probe").chmod(0o755)
    files = slurm_files(cluster)
    key = generate_jwt_key()
    with SlurmSandbox(tmp_path / "box", files, controller_host(cluster), generate_munge_key(),
                      names=[NODE], slurmd=NODE, node_conf=worker_node_conf(cluster.spec.node_sets[0]), jwt_key=key,
                      rest=True, jail=jail) as box:
        assert box.status["ready"], (box.status, box.log("slurmd.log"), box.log("slurmrestd.log"))
        reach_slurmctld_from(jail, box, files["slurm.conf"], controller_host(cluster))
        forwarder = RestForwarder(str(SlurmSandbox.rest_socket(tmp_path / "box")))
        try:
            client = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0)
            now = time.time()
            plan = _round(client, cluster, [], now)
            job = plan.status[0]["running"][NODE]
            fields = until(lambda: (f := _job(box, job)).get("JobState") == "COMPLETED" and f, 60, "the check job")
            assert (fields["UserId"].split("(")[0], fields["JobName"], fields["ExitCode"]) == ("root", "soperator-check-probe",
                                                                                             "0:0")
            plan = _round(client, cluster, plan.status, now + 1)
            assert (plan.status[0]["passed"], plan.status[0]["failed"], plan.submit) == (1, {}, [])

            # A user's job on the node: the next round leaves it alone.
            user = box.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 30").stdout.strip()
            until(lambda: _job(box, user).get("JobState") == "RUNNING", 30, "the user's job")
            assert _round(client, cluster, plan.status, now + 20).submit == []
            box.run("scancel", user)
            until(lambda: box.run("sinfo", "-h", "-n", NODE, "-o", "%t").stdout.strip() == "idle", 30, "idle again")

            (jail / "opt" / "checks" / "fail").write_text("")  # not /tmp: each job has its own
            plan = _round(client, cluster, plan.status, now + 40)
            job = plan.status[0]["running"][NODE]
            until(lambda: _job(box, job).get("JobState") == "FAILED", 60, "the failing check job")
            plan = _round(client, cluster, plan.status, now + 41)
            assert plan.failures == [("probe", NODE, "gpu 3: xid 79")]
            state = box.run("sinfo", "-h", "-n", NODE, "-o", "%t|%E").stdout.strip()
            assert state == f"drain|{ACTIVE_CHECK} probe: gpu 3: xid 79", state
            # A drained node is the admin's to look at: no round checks it.
            assert _round(client, cluster, plan.status, now + 60).submit == []

            # Drained by its admin between the plan and the submission: the check job pends, and is
            # cancelled when the next round is due; the node is not checked.
            (jail / "opt" / "checks" / "fail").unlink()
            box.run("scontrol", "update", f"NodeName={NODE}", "State=RESUME")
            plan = plan_checks(cluster, {n.name: n for n in client.list_nodes()}, client.list_jobs(), plan.status,
                               now + 70)
            assert [s.node for s in plan.submit] == [NODE]
            box.run("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", "Reason=admin")
            job = client.submit_job(plan.submit[0].script, plan.submit[0].job)
            plan.status[0]["running"][NODE] = job
            until(lambda: _job(box, job).get("Reason") not in (None, "None"), 30, "the check job to pend")
            assert _job(box, job)["JobState"] == "PENDING"
            assert _round(client, cluster, plan.status, now + 75).cancel == []  # not due yet: it may still start
            plan = _round(client, cluster, plan.status, now + 80)
            assert (plan.cancel, plan.submit, plan.status[0]["skipped"]) == ([("probe", NODE, job)], [], 1)
            until(lambda: _job(box, job).get("JobState") == "CANCELLED", 30, "the pending check job cancelled")
            assert box.run("sinfo", "-h", "-n", NODE, "-o", "%E").stdout.strip() == "admin"

            # A cancel that does not reach Slurm (slurmrestd gone: nothing listens) is named, and the job
            # still followed. (Slurm itself answers a cancel of a job it does not know with no error.)
            gone = SlurmRestClient("http://127.0.0.1:9", lambda: mint_token(key), retries=0)
            refused = CheckPlan(cancel=[("probe", NODE, job)], status=[{"name": "probe", "running": {}, "skipped": 1}])
            seen = Observation({n.name: n for n in client.list_nodes()}, Cond("SlurmReachable", True, "", ""), gone)
            cond = act_on_checks(None, {}, seen, refused, True)  # no event: nothing was cancelled
            assert (cond.ok, cond.reason) == (False, "CancelFailed") and \
                cond.message.startswith(f"cancelling probe's job {job} on {NODE}: "), cond
            assert refused.status == [{"name": "probe", "running": {NODE: job}, "skipped": 0}]
        finally:
            forwarder.close()


def _job(box: SlurmSandbox, job_id) -> dict[str, str]:
    text = box.run("scontrol", "-o", "show", "job", str(job_id)).stdout
    return dict(f.split("=", 1) for f in text.split() if "=" in f)
