"""Active health checks through the operator's reconcile, against the real apiserver and the real
slurmctld, slurmrestd and slurmd of tests/support/rest_slurm.py: a check in the spec becomes a job on
the registered idle node, its pass and its failure land in status.healthChecks and condition
HealthChecks, the failure drains the node with the program's last line and is an event; a check
taken out of the spec leaves no status behind."""
from __future__ import annotations

import json

import pytest

from soperator.kube import Kube
from soperator.node.drains import ACTIVE_CHECK
from soperator.reconcile import reconcile
from soperator.render.configs import controller_host
from tests.kube.test_reconcile import _body
from tests.kube.test_slurm_status import connect_to, start_cluster
from tests.slurm.test_active_checks import PROBE
from tests.support.rest_slurm import NAME, REGISTERED
from tests.support.thin_jail import reach_slurmctld_from
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
CHECK = {"name": "probe", "program": "/opt/checks/probe", "everySeconds": 10, "nodeSets": ["cpu"]}


def test_a_checks_rounds_reach_the_status_the_events_and_slurm(api, kubectl, crd_installed, namespace, rest_slurm):
    kube, connect = Kube(api), connect_to(rest_slurm)
    jail = rest_slurm.box.work / "jail"
    (jail / "opt" / "checks").mkdir(parents=True, exist_ok=True)
    (jail / "opt" / "checks" / "probe").write_text(PROBE)
    (jail / "opt" / "checks" / "probe").chmod(0o755)
    reach_slurmctld_from(jail, rest_slurm.box, (rest_slurm.box.work / "etc-slurm" / "slurm.conf").read_text(),
                         controller_host(rest_slurm.cluster))
    start_cluster(kube, kubectl, namespace, connect)

    def step() -> tuple[dict, dict]:
        reconcile(kube, _body(kube, namespace, NAME), connect)
        status = _body(kube, namespace, NAME)["status"]
        return {c["type"]: c for c in status["conditions"]}["HealthChecks"], status.get("healthChecks", [{}])[0]

    def job_ended(record: dict) -> bool:
        job = rest_slurm.job(str(record["running"][REGISTERED]))
        return job["JobState"] not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")

    def patch(spec: dict) -> None:
        kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps({"spec": spec}))

    try:
        patch({"healthCheck": {"active": [CHECK]}})
        cond, record = step()
        assert set(record["running"]) == {REGISTERED}, record  # the other pods' nodes never registered
        until(lambda: job_ended(record), 60, "the first round's job")
        cond, record = step()
        assert (cond["status"], cond["reason"], record["passed"], record["failed"]) == ("True", "Passing", 1, {})

        (jail / "opt" / "checks" / "fail").write_text("")
        record = until(lambda: (r := step()[1]).get("running") and r, 30, "the next round (everySeconds 10)")
        until(lambda: job_ended(record), 60, "the failing round's job")
        cond, record = step()
        assert (cond["status"], cond["reason"]) == ("False", "Failing")
        assert cond["message"] == f"probe: {REGISTERED} (gpu 3: xid 79)"
        assert record["failed"] == {REGISTERED: "gpu 3: xid 79"}
        state = rest_slurm.run("sinfo", "-h", "-n", REGISTERED, "-o", "%t|%E").strip()
        assert state == f"drain|{ACTIVE_CHECK} probe: gpu 3: xid 79", state
        events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
        assert [e["message"] for e in events if e["reason"] == "CheckFailed"] == [
            f"probe failed on {REGISTERED}: gpu 3: xid 79"]

        patch({"healthCheck": {"active": None}})
        reconcile(kube, _body(kube, namespace, NAME), connect)
        status = _body(kube, namespace, NAME)["status"]
        assert "healthChecks" not in status and "HealthChecks" not in {c["type"] for c in status["conditions"]}
    finally:
        (jail / "opt" / "checks" / "fail").unlink(missing_ok=True)
        rest_slurm.resume(REGISTERED)
