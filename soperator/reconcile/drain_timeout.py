"""drainTimeout: which of the nodes a scale-in or an update waits for are past their deadline. Pure:
the deadline counts from when Slurm says the operator's drain reason was set (reason_changed_at), so
an operator restarted mid-way counts from the drain itself, not from when it began to watch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from soperator.api.spec import DrainTimeout
from soperator.node.drains import owned
from soperator.slurm import SlurmJob, SlurmNode


def overdue(waiting: list[str], nodes: dict[str, SlurmNode], own_reason: str, timeout: DrainTimeout | None,
            now: float) -> list[str]:
    """The nodes of `waiting` drained by the operator (`own_reason`) at least timeout's seconds ago.
    A drain by anyone else never times out: it is not the operator's to end."""
    if timeout is None:
        return []
    out = []
    for name in waiting:
        node = nodes.get(name)
        if (node and owned(node.flags, node.reason, own_reason) and node.reason_changed_at is not None
                and now - node.reason_changed_at >= timeout.after_seconds):
            out.append(name)
    return out


def jobs_on(jobs: list[SlurmJob], names: list[str]) -> list[int]:
    """The jobs that hold any of these nodes now."""
    wanted = set(names)
    return sorted({j.job_id for j in jobs if j.running() and wanted & set(j.nodes)})


@dataclass(frozen=True)
class Waited:
    """What a node set's scale-in or update waits for: the jobs on its drained nodes, and what its
    drainTimeout does about them this pass."""

    jobs: list[int]  # still holding the nodes once `cancel` is done
    cancel: list[int]  # on nodes past the deadline, action Cancel: cancelled this pass
    timed_out: list[str]  # nodes past the deadline whose jobs keep running (action Warn)


def plan_wait(busy: list[str], nodes: dict[str, SlurmNode], own_reason: str, timeout: DrainTimeout | None,
              jobs_of: Callable[[list[str]], list[int]], now: float) -> Waited:
    """`busy`: the nodes drained with `own_reason` that still run jobs; `jobs_of`: the jobs holding some
    nodes (Slurm's job list, read once a pass and only when something waits)."""
    jobs = jobs_of(busy)
    late = overdue(busy, nodes, own_reason, timeout, now)
    if not late:
        return Waited(jobs, [], [])
    if timeout.action == "Warn":
        return Waited(jobs, [], late)
    cancel = jobs_of(late)
    return Waited([j for j in jobs if j not in cancel], cancel, [])
