"""What a pending job's `scontrol -o show job` line says about why it waits."""
from __future__ import annotations

# slurmctld gives a job whose partition has no usable node one of two reasons, depending on which
# of its schedulers looked at it last: select_nodes() (at submit, or backfill) says ReqNodeNotAvail;
# the main scheduler's pass skips it before selection with Resources and this description. Both
# mean "waiting for nodes"; which one shows is a race inside slurmctld (seen in CI).
_WAITING_FOR_NODES = ("Reason=ReqNodeNotAvail", "Reason=Nodes_required_for_job_are_DOWN")


def waits_for_nodes(show_job: str) -> bool:
    """True when the job is PENDING for want of nodes (not held, not refused, not for priority)."""
    return "JobState=PENDING" in show_job and any(reason in show_job for reason in _WAITING_FOR_NODES)
