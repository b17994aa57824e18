"""Active health checks as a table: the spec, Slurm's nodes and jobs and the last status in; the jobs
to submit, the drains and comments, the failures and the new status out."""
from __future__ import annotations

import pytest

from soperator.api import SpecError
from soperator.node.drains import ACTIVE_CHECK
from soperator.reconcile.checks import TOP_PRIORITY, plan_checks, verdict
from soperator.slurm import SlurmJob, SlurmNode
from tests.conftest import make_cluster
from tests.support.slurm_states import named_nodes

T0 = 1_800_000_000.0
NODE_SETS = [{"name": "cpu", "replicas": 2}, {"name": "gpu", "replicas": 1, "gpus": 1}]
PARTITIONS = [{"name": "main", "default": True, "nodeSets": ["cpu"]}, {"name": "gpu", "nodeSets": ["gpu"]}]


def _cluster(**check) -> object:
    return make_cluster(nodeSets=NODE_SETS, partitions=PARTITIONS, healthCheck={"active": [
        {"name": "probe", "program": "/opt/checks/probe", "everySeconds": 600, **check}]})


def _job(job_id: int, state: str, exit_code: int | None = None, comment: str = "") -> SlurmJob:
    return SlurmJob.model_validate({"job_id": job_id, "job_state": [state], "comment": comment, "exit_code": {
        "status": ["SUCCESS"], "return_code": {"set": exit_code is not None, "infinite": False,
                                              "number": exit_code or 0}}})


NODES = named_nodes("demo-cpu-0=IDLE", "demo-cpu-1=ALLOCATED", "demo-gpu-0=IDLE", "demo-cpu-7=IDLE+DRAIN:admin",
               "demo-gpu-1=IDLE+CLOUD+POWERED_DOWN")


def test_a_round_runs_one_top_priority_job_alone_on_each_idle_node_of_its_node_sets():
    plan = plan_checks(_cluster(), NODES, [], [], T0)
    assert [(s.check, s.node) for s in plan.submit] == [("probe", "demo-cpu-0"), ("probe", "demo-gpu-0")]
    job = plan.submit[0].job
    assert (job["partition"], job["required_nodes"], job["shared"], job["user_id"]) == ("main", ["demo-cpu-0"],
                                                                                         ["none"], "0")
    assert job["priority"] == {"set": True, "number": TOP_PRIORITY} and job["time_limit"]["number"] == 10
    assert plan.submit[1].job["partition"] == "gpu"
    assert "out=$(/opt/checks/probe 2>&1)" in plan.submit[0].script
    assert plan.status == [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {}, "passed": 0,
                            "skipped": 0, "failed": {}}]
    assert [s.node for s in plan_checks(_cluster(nodeSets=["gpu"]), NODES, [], [], T0).submit] == ["demo-gpu-0"]
    assert [s.node for s in plan_checks(_cluster(gpusOnly=True), NODES, [], [], T0).submit] == ["demo-gpu-0"]


def test_while_a_round_runs_or_before_its_time_no_round_starts():
    running = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-0": 7}}]
    assert plan_checks(_cluster(), NODES, [_job(7, "RUNNING")], running, T0 + 900).submit == []
    done = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {}}]
    assert plan_checks(_cluster(), NODES, [], done, T0 + 599).submit == []
    assert len(plan_checks(_cluster(), NODES, [], done, T0 + 600).submit) == 2


def test_a_job_still_pending_when_the_next_round_is_due_is_cancelled_and_its_node_skipped():
    """A node taken by a user's job before its check started: the round cannot end on it."""
    nodes = named_nodes("demo-cpu-0=IDLE", "demo-cpu-1=ALLOCATED", "demo-gpu-0=IDLE")
    status = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-1": 7, "demo-gpu-0": 8},
               "passed": 1, "skipped": 0}]
    jobs = [_job(7, "PENDING"), _job(8, "RUNNING")]
    before = plan_checks(_cluster(), nodes, jobs, status, T0 + 599)
    assert (before.cancel, before.submit, before.status[0]["running"]) == ([], [], {"demo-cpu-1": 7, "demo-gpu-0": 8})
    # Due with another job still running: the pending one goes, the round goes on.
    due = plan_checks(_cluster(), nodes, jobs, status, T0 + 600)
    assert due.cancel == [("probe", "demo-cpu-1", 7)] and due.submit == []
    assert (due.status[0]["running"], due.status[0]["skipped"], due.status[0]["passed"]) == ({"demo-gpu-0": 8}, 1, 1)
    # When it ends, the next round starts, the skip reported with it.
    ended = plan_checks(_cluster(), nodes, [_job(8, "COMPLETED", 0)], due.status, T0 + 601)
    assert [s.node for s in ended.submit] == ["demo-cpu-0", "demo-gpu-0"] and ended.cancel == []
    assert (ended.status[0]["lastRound"], ended.status[0]["skipped"]) == ("2027-01-15T08:10:01Z", 0)
    # Alone in its round: cancelled, and the next round starts in the same pass, the idle nodes only.
    alone = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-1": 7}}]
    plan = plan_checks(_cluster(), nodes, [_job(7, "PENDING")], alone, T0 + 600)
    assert plan.cancel == [("probe", "demo-cpu-1", 7)]
    assert [s.node for s in plan.submit] == ["demo-cpu-0", "demo-gpu-0"]
    assert (plan.status[0]["lastRound"], plan.status[0]["skipped"]) == ("2027-01-15T08:10:00Z", 1)
    # A running check job is never cancelled: its time limit ends it.
    assert plan_checks(_cluster(), nodes, [_job(7, "RUNNING")], alone, T0 + 6000).cancel == []


def test_a_failure_drains_with_the_programs_last_line_and_a_pass_clears_the_nodes_entry():
    status = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-0": 7, "demo-gpu-0": 8},
               "failed": {"demo-cpu-1": "old"}}]
    jobs = [_job(7, "FAILED", 1, comment="gpu 3:  xid 79"), _job(8, "COMPLETED", 0)]
    plan = plan_checks(_cluster(), NODES, jobs, status, T0 + 60)
    assert plan.drain == {"demo-cpu-0": f"{ACTIVE_CHECK} probe: gpu 3: xid 79"}
    assert plan.failures == [("probe", "demo-cpu-0", "gpu 3: xid 79")]
    assert plan.status[0]["failed"] == {"demo-cpu-0": "gpu 3: xid 79", "demo-cpu-1": "old"}
    assert (plan.status[0]["passed"], plan.status[0]["running"], plan.submit) == (1, {}, [])
    # The old failure passes next time: gone from the list; a node gone from Slurm leaves it too.
    later = plan_checks(_cluster(), named_nodes("demo-cpu-1=IDLE"), [_job(9, "COMPLETED", 0)],
                        [{**plan.status[0], "running": {"demo-cpu-1": 9}}], T0 + 120)
    assert later.status[0]["failed"] == {} and later.drain == {}


def test_comment_only_notes_the_failure_and_clears_its_own_note_on_a_pass():
    status = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-0": 7}}]
    plan = plan_checks(_cluster(action="Comment"), NODES, [_job(7, "TIMEOUT")], status, T0 + 60)
    assert plan.drain == {} and plan.comment == {"demo-cpu-0": f"{ACTIVE_CHECK} probe: ran past its time limit"}
    noted = {"demo-cpu-0": SlurmNode(name="demo-cpu-0", state=["IDLE"], comment=f"{ACTIVE_CHECK} probe: x"),
             "demo-cpu-1": SlurmNode(name="demo-cpu-1", state=["IDLE"], comment="the admin's")}
    status = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-0": 7, "demo-cpu-1": 8}}]
    plan = plan_checks(_cluster(action="Comment"), noted, [_job(7, "COMPLETED", 0), _job(8, "COMPLETED", 0)],
                       status, T0 + 60)
    assert plan.comment == {"demo-cpu-0": ""}


@pytest.mark.parametrize("job, expected", [
    (_job(1, "COMPLETED", 0), (True, "")), (_job(1, "FAILED", 3), (False, "exit 3")),
    (_job(1, "OUT_OF_MEMORY"), (False, "ran out of memory")), (_job(1, "RUNNING"), (None, "running")),
    (_job(1, "CANCELLED"), (None, "its job ended CANCELLED")), (_job(1, "NODE_FAIL"), (None, "its job ended NODE_FAIL")),
    (None, (None, "its job is gone from Slurm"))])
def test_only_an_end_that_speaks_of_the_node_is_a_verdict(job, expected):
    assert verdict(job) == expected


def test_slurm_unknown_starts_nothing_and_keeps_the_last_status():
    status = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-0": 7}}]
    plan = plan_checks(_cluster(), None, None, status, T0 + 9999)
    assert (plan.submit, plan.drain, plan.status) == ([], {}, status)
    assert plan_checks(_cluster(), NODES, None, [], T0).submit == []


@pytest.mark.parametrize("check, field", [
    ({"name": "c", "program": "/opt/c"}, "spec.healthCheck.active[0].everySeconds"),
    ({"name": "c", "program": "opt/c", "everySeconds": 60}, "spec.healthCheck.active[0].program"),
    ({"name": "c", "program": "/opt/../../etc/c", "everySeconds": 60}, "spec.healthCheck.active[0].program"),
    ({"name": "c", "program": "/opt/c", "everySeconds": 60, "nodeSets": ["gone"]},
     "spec.healthCheck.active[0].nodeSets[0]"),
    ({"name": "c", "program": "/opt/c", "everySeconds": 60, "gpusOnly": True, "nodeSets": ["cpu"]},
     "spec.healthCheck.active[0].gpusOnly"),
])
def test_a_check_that_could_not_run_as_written_is_refused_with_its_field(check, field):
    with pytest.raises(SpecError) as exc:
        make_cluster(nodeSets=NODE_SETS, partitions=PARTITIONS, healthCheck={"active": [check]})
    assert str(exc.value).startswith(f"{field}: "), exc.value


def test_a_node_another_step_drains_this_pass_keeps_that_steps_reason():
    status = [{"name": "probe", "lastRound": "2027-01-15T08:00:00Z", "running": {"demo-cpu-0": 7}}]
    plan = plan_checks(_cluster(), NODES, [_job(7, "FAILED", 2)], status, T0 + 60, taken={"demo-cpu-0"})
    assert plan.drain == {} and plan.failures == [("probe", "demo-cpu-0", "exit 2")]
