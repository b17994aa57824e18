"""drainTimeout as a table: which drained nodes are past their deadline, and which jobs hold them.
The clock is the drain's own time in Slurm (reason_changed_at), never the operator's memory."""
from __future__ import annotations

from soperator.api.spec import DrainTimeout
import pytest

from soperator.reconcile.drain_timeout import Waited, jobs_on, overdue, plan_wait
from soperator.node.drains import SCALE_IN
from soperator.slurm import SlurmJob, SlurmNode

T = DrainTimeout(after_seconds=600, action="Cancel")


def _node(name: str, reason: str, at: int | None) -> SlurmNode:
    stamp = {"set": at is not None, "infinite": False, "number": at or 0}  # as slurmrestd v0.0.44 writes it
    return SlurmNode.model_validate({"name": name, "state": ["ALLOCATED", "DRAIN"], "reason": reason,
                                     "reason_changed_at": stamp})


def test_only_the_operators_own_drains_past_the_deadline_are_overdue():
    nodes = {"a": _node("a", f"{SCALE_IN} of node set cpu", 1000), "b": _node("b", f"{SCALE_IN} x", 1500),
             "c": _node("c", "admin: bad dimm", 0), "d": _node("d", SCALE_IN, None)}
    assert overdue(["a", "b", "c", "d", "gone"], nodes, SCALE_IN, T, now=1600) == ["a"]
    assert overdue(["a", "b"], nodes, SCALE_IN, T, now=2100) == ["a", "b"]
    assert overdue(["a"], nodes, SCALE_IN, None, now=10**9) == []  # no drainTimeout: no deadline


def test_jobs_on_counts_each_job_holding_the_nodes_once():
    def job(i: int, state: str, *names: str) -> SlurmJob:
        return SlurmJob.model_validate({"job_id": i, "job_state": [state], "job_resources": {
            "nodes": {"allocation": [{"name": n} for n in names]}}})
    jobs = [job(1, "RUNNING", "a", "b"), job(2, "RUNNING", "b"), job(3, "COMPLETING", "c"), job(4, "COMPLETED", "a"),
            SlurmJob.model_validate({"job_id": 5, "job_state": ["PENDING"]})]
    assert jobs_on(jobs, ["a", "b"]) == [1, 2]
    assert jobs_on(jobs, ["c"]) == [3]  # still ending there: the node is not free yet
    assert jobs_on(jobs, []) == []


@pytest.mark.parametrize("timeout, now, waited", [
    (None, 10**9, Waited([11, 12], [], [])),  # no drainTimeout: wait as long as the jobs run
    (T, 1500, Waited([11, 12], [], [])),  # before the deadline
    (DrainTimeout(after_seconds=600, action="Warn"), 1700, Waited([11, 12], [], ["a"])),
    (T, 1700, Waited([12], [11], [])),  # past a's deadline: a's job cancelled, b's waited for
    (T, 2200, Waited([], [11, 12], [])),
], ids=["no-timeout", "early", "warn", "cancel-one", "cancel-both"])
def test_the_wait_is_planned_from_the_drains_age_and_the_jobs_on_each_node(timeout, now, waited):
    nodes = {"a": _node("a", f"{SCALE_IN} of node set cpu", 1000), "b": _node("b", f"{SCALE_IN} of node set cpu", 1500)}
    held = {"a": [11], "b": [12]}
    assert plan_wait(["a", "b"], nodes, SCALE_IN, timeout, lambda names: sorted(j for n in names for j in held[n]),
                     now) == waited
