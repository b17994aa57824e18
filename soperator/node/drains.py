"""Every drain reason soperator writes into Slurm, and the one test of whose a drain is.

A drain belongs to whoever set it, and only its owner undoes it: an admin's drain, a health check's or
another operation's stays as it is. Ownership is the reason's prefix: the operator appends what it
drains for (" of node set cpu"). Standard library only: the node code (hold.py, fresh_boot.py) and the
operator's planners (soperator/reconcile) both import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

# The operator's (soperator/reconcile).
SCALE_IN = "soperator: scale-in"
UPDATE = "soperator: update"
MAINTENANCE = "soperator: maintenance"
# A Kubernetes node cordoned, not ready or gone (reconcile/kube_nodes.py): "<prefix> <node> cordoned".
KUBE_NODE = "soperator: kubernetes node"
# An autoscaling worker whose pod did not start within its node set's autoscale.resumeTimeout
# (reconcile/autoscale.py): its record is set DOWN with this reason, then what holds the pod back.
START_FAILED = "soperator: autoscale: the worker did not start"
# Slurm's own reason for a record it set DOWN at slurmConfig.resumeTimeout.
SLURM_RESUME_TIMEOUT = "ResumeTimeout"
# The node code's: a failed health check (health_check.py), then the program's last line.
HEALTH_CHECK = "soperator: health check"
# An active check's failure (reconcile/checks.py): "<prefix> <check>: <the program's last line>".
ACTIVE_CHECK = "soperator: check"
# And: the populate Job's hold while it overwrites the jail (hold.py), and a worker
# container that started again after its jobs died with the previous one (fresh_boot.py).
POPULATE_HOLD = "soperator:populate-jail-overwrite"
CONTAINER_RESTARTED = "soperator:container-restarted: its jobs died with the previous container"

ALL = (SCALE_IN, UPDATE, MAINTENANCE, KUBE_NODE, START_FAILED, HEALTH_CHECK, ACTIVE_CHECK, POPULATE_HOLD,
       CONTAINER_RESTARTED)


def owned(flags: Iterable[str], reason: str, own: str) -> bool:
    """Drained, and by `own`: the node has the DRAIN flag and its reason starts with `own`."""
    return "DRAIN" in flags and reason.startswith(own)


@dataclass(frozen=True, kw_only=True)
class DrainSteps:
    """What a planner asks of Slurm for one node set, by node name: the step type every planner's plan
    extends (scale-in, update, maintenance), so one act drains and resumes them all alike."""

    drain: list[str] = field(default_factory=list)
    resume: list[str] = field(default_factory=list)  # only ever the planner's own drains
    busy: list[str] = field(default_factory=list)  # drained for this, still running jobs (or unknown)
