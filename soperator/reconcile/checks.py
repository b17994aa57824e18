"""Active health checks (spec.healthCheck.active) as Slurm jobs: pure, the spec, Slurm's nodes and jobs
and the last status in; the jobs to submit, the drains and comments, and the new status out.

A round starts once every `everySeconds`: one job per idle node of the check's node sets, alone on
its node (`shared: none`), at the top priority so the queue does not hold it, as root in the jail
like any job step. Only idle nodes: a node running a user's job, drained, down or powered down is
left for the next round (a check never powers a node up). While a round's jobs run, the next waits;
a job still pending when the next round is due (its node was taken, drained or lost first) is
cancelled, its node left unchecked (an event, and the status's `skipped` until the next round), so
one stuck node never stops the checks. A running job ends by its time limit.

A job that completed with exit 0 passed; one that failed, timed out or ran out of memory failed,
its reason the program's last line (the job script writes it into the job's comment) or its state.
A job cancelled, preempted or lost with its node says nothing about the node. A failure drains the
node with reason drains.ACTIVE_CHECK then "<check>: <why>" (action Drain), or sets that as the node's
comment (action Comment, cleared by the next pass of the same check). A drained node is not checked
again: the admin who fixed it resumes it, as after any drain with a reason.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from soperator.api.cluster import SlurmCluster
from soperator.api.slurm_config import ActiveCheck
from soperator.node.drains import ACTIVE_CHECK
from soperator.node.layout import ordinal_of
from soperator.render.common import object_name
from soperator.render.configs import check_job_script
from soperator.slurm import SlurmJob, SlurmNode

# A reason or comment is one line that reads in sinfo.
_WHY_CHARS = 200
# Failed nodes listed in the status per check (the events and the drains name every one).
_LISTED = 32
# What a round's job may take as failure, with the words used when it left none.
_FAILED = {"FAILED": "failed", "TIMEOUT": "ran past its time limit", "OUT_OF_MEMORY": "ran out of memory"}
_STILL = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")
# The top priority Slurm gives a job (a SlurmUser's or root's to set): nothing queued goes first.
TOP_PRIORITY = 4294967293
JOB_PREFIX = "soperator-check-"


@dataclass(frozen=True)
class Submit:
    check: str
    node: str
    script: str
    job: dict  # v0.0.44's job description


@dataclass(frozen=True)
class CheckPlan:
    submit: list[Submit] = field(default_factory=list)
    drain: dict[str, str] = field(default_factory=dict)  # node: reason
    comment: dict[str, str] = field(default_factory=dict)  # node: comment ("" clears ours)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (check, node, why), this pass's
    cancel: list[tuple[str, str, int]] = field(default_factory=list)  # (check, node, job) pending when the next round is due
    status: list[dict] = field(default_factory=list)  # status.healthChecks; act adds the submitted jobs


def _time(text: str | None) -> float | None:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def _rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(int(at), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _targets(cluster: SlurmCluster, check: ActiveCheck) -> dict[str, str]:
    """StatefulSet name -> the node set it runs, for the node sets this check runs on."""
    return {object_name(cluster, n.name): n.name for n in cluster.spec.node_sets
            if (not check.node_sets or n.name in check.node_sets) and (n.gpus or not check.gpus_only)}


def _partition(cluster: SlurmCluster, node_set: str) -> str:
    return next(p.name for p in cluster.spec.partitions if not p.node_sets or node_set in p.node_sets)


def _idle(node: SlurmNode) -> bool:
    return node.category() == "idle" and node.power() is None and not node.reason


def verdict(job: SlurmJob | None) -> tuple[bool | None, str]:
    """(passed, why): None while it runs, or when its end says nothing about the node."""
    if job is None:
        return None, "its job is gone from Slurm"
    state = job.job_state[0] if job.job_state else ""
    if state in _STILL:
        return None, "running"
    if state == "COMPLETED" and job.exit_code == 0:
        return True, ""
    if state in _FAILED or state == "COMPLETED":
        why = " ".join(job.comment.split()) or (f"exit {job.exit_code}" if job.exit_code else _FAILED.get(state, state))
        return False, why[:_WHY_CHARS]
    return None, f"its job ended {state}"


def job_description(cluster: SlurmCluster, check: ActiveCheck, node: str, node_set: str) -> dict:
    return {"name": f"{JOB_PREFIX}{check.name}", "partition": _partition(cluster, node_set),
            "required_nodes": [node], "minimum_nodes": 1, "shared": ["none"], "user_id": "0",
            "time_limit": {"set": True, "number": check.time_limit_minutes},
            "priority": {"set": True, "number": TOP_PRIORITY}, "current_working_directory": "/",
            "standard_output": "/dev/null", "environment": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
                # What the node should have, for a program that counts (the jail's gpu-health).
                f"SOPERATOR_NODE_GPUS={next(n.gpus for n in cluster.spec.node_sets if n.name == node_set)}"]}


def plan_checks(cluster: SlurmCluster, nodes: dict[str, SlurmNode] | None, jobs: list[SlurmJob] | None,
                status: list[dict], now: float, taken: frozenset[str] | set[str] = frozenset()) -> CheckPlan:
    """`nodes`, `jobs`: Slurm's (None: unknown, and nothing is done); `status`: status.healthChecks;
    `taken`: nodes another step drains this pass (one owner per drain: that step's reason stays)."""
    checks = cluster.spec.health_check.active
    if not checks:
        return CheckPlan()
    last = {s.get("name"): s for s in status or []}
    if nodes is None or jobs is None:
        return CheckPlan(status=[last[c.name] for c in checks if c.name in last])
    by_id = {j.job_id: j for j in jobs}
    plan = CheckPlan()
    for check in checks:
        record = dict(last.get(check.name) or {"name": check.name})
        running, failed = dict(record.get("running") or {}), dict(record.get("failed") or {})
        passed, skipped, cancelled = record.get("passed", 0), record.get("skipped", 0), 0
        started = _time(record.get("lastRound"))
        due = started is None or now - started >= check.every_seconds
        for node, job_id in sorted(running.items()):
            job = by_id.get(job_id)
            ok, why = verdict(job)
            if why == "running" and due and job.job_state[:1] == ["PENDING"]:
                plan.cancel.append((check.name, node, job_id))
                del running[node]
                cancelled += 1
                continue
            if why == "running":
                continue
            del running[node]
            if ok:
                passed += 1
                failed.pop(node, None)
                if node in nodes and nodes[node].comment.startswith(f"{ACTIVE_CHECK} {check.name}:"):
                    plan.comment[node] = ""
            elif ok is False:
                failed[node] = why
                plan.failures.append((check.name, node, why))
                note = f"{ACTIVE_CHECK} {check.name}: {why}"
                if check.action == "Comment":
                    plan.comment[node] = note
                elif node in nodes and "DRAIN" not in nodes[node].flags and node not in taken:
                    plan.drain[node] = note
        # A node stays failed until it passes this check again (or is gone from Slurm).
        failed = {n: why for n, why in sorted(failed.items()) if n in nodes}
        if not running and due:
            targets = _targets(cluster, check)
            chosen = [(name, targets[sts]) for name, node in sorted(nodes.items())
                      for sts in [name.rpartition("-")[0]] if sts in targets and ordinal_of(sts, name) is not None
                      and _idle(node) and name not in plan.drain]
            script = check_job_script(check, _WHY_CHARS)
            plan.submit.extend(Submit(check.name, name, script, job_description(cluster, check, name, node_set))
                               for name, node_set in chosen)
            record, passed, skipped = {"name": check.name, "lastRound": _rfc3339(now)}, 0, 0
        record.update(running=running, passed=passed, skipped=skipped + cancelled,
                      failed=dict(list(failed.items())[:_LISTED]))
        plan.status.append(record)
    return plan
