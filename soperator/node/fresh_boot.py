"""A worker container that starts is a node that booted: every process of the container before it
(its slurmd, every slurmstepd and job step) died with it, whatever ended it (slurmd killed, the
container's main process killed or OOM-killed, the pod deleted, its Kubernetes node gone).

Slurm cannot see that by itself. The host kernel's boot time is unchanged, so a new slurmd under the
same node name looks like a slurmd restart, after which job steps live on: slurmctld keeps the old
jobs RUNNING on the node until their time limit. So before its slurmd registers, a new container
tells slurmctld what is true: the node went down, and the jobs it held died with it. Setting the
node DOWN is what Slurm itself does to a node that fails: each job on it ends as NODE_FAIL, or is
requeued when it may be (JobRequeue, --requeue). slurmd then starts with `-b` (its boot time is its
own start) and registers; with ReturnToService=2 the node is back in service at once.

Nothing that runs is killed here: a new container of this node's name exists only once the old one
is gone (a StatefulSet pod, one container). A drain (an admin's or the operator's) is kept: its reason
stays, so the node returns drained.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from .scontrol import scontrol
from .supervise import log

REASON = "soperator:container-restarted: its jobs died with the previous container"
# States under which slurmctld counts jobs on the node (the first is the base state, flags follow).
BUSY = {"ALLOCATED", "MIXED", "COMPLETING"}


@dataclass(frozen=True)
class Record:
    """The node as slurmctld has it (`scontrol --json show node`: the reason whole, spaces and all)."""

    name: str
    state: tuple[str, ...]
    reason: str
    instance_id: str

    @property
    def busy(self) -> bool:
        return bool(BUSY & set(self.state))

    @classmethod
    def parse(cls, data: dict, name: str) -> Record | None:
        for node in data.get("nodes", []):
            if node.get("name") == name:
                return cls(name, tuple(node.get("state") or ()), node.get("reason") or "", node.get("instance_id") or "")
        return None


def record(name: str, env: dict[str, str] | None = None) -> tuple[Record | None, str]:
    """(the record, None if slurmctld has none; why slurmctld could not say, else ''). An answer
    with errors in it is no answer: "no record" is believed only from a slurmctld that answered."""
    proc = scontrol("--json", "show", "node", name, env=env)
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = {}
    errors = [e.get("description") or e.get("error") or str(e) for e in data.get("errors", [])]
    if proc.returncode != 0 or errors or "nodes" not in data:
        return None, "; ".join(errors) or proc.stderr.strip() or f"exit code {proc.returncode}"
    return Record.parse(data, name), ""


def previous_record(name: str, conf_server: str, wait: float, poll: float = 2.0) -> Record | None:
    """The node's record in slurmctld (None: no record, a new node). Before slurmd runs there is no
    configuration on this container: scontrol fetches it from the conf server. Waits, saying why,
    while slurmctld does not answer: slurmd could not register then either."""
    env = {**os.environ, "SLURM_CONF_SERVER": conf_server}
    deadline = time.monotonic() + wait
    said = ""
    while True:
        node, failure = record(name, env)
        if not failure:
            return node
        if time.monotonic() > deadline:
            raise RuntimeError(f"slurmctld did not say within {wait:.0f} s whether node {name} held jobs "
                               f"(scontrol: {failure}); slurmd is not started")
        if failure != said:
            log(f"waiting for slurmctld to say whether node {name} held jobs: {failure}")
            said = failure
        time.sleep(poll)


def fail_jobs_of_previous_container(name: str, conf_server: str, wait: float = 300.0) -> str:
    """Set the node DOWN if slurmctld still counts jobs on it; returns what was done, for the log."""
    node = previous_record(name, conf_server, wait)
    if node is None:
        return f"node {name} is new to slurmctld"
    state = "+".join(node.state)
    if not node.busy:
        return f"node {name} held no job ({state})"
    # A drained node keeps its drain and reason: it returns drained, as its owner left it.
    reason = node.reason if "DRAIN" in node.state and node.reason else REASON
    proc = scontrol("update", f"NodeName={name}", "State=DOWN", f"Reason={reason}",
                    env={**os.environ, "SLURM_CONF_SERVER": conf_server})
    if proc.returncode != 0:
        raise RuntimeError(f"cannot set node {name} DOWN for the jobs of the previous container: "
                           f"{proc.stderr.strip() or proc.returncode}; slurmd is not started")
    return f"node {name} was {state} from the previous container: set DOWN, its jobs end as node failures"
