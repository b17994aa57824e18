"""A worker container that starts is a node that booted: every process of the container before it
(its slurmd, every slurmstepd and job step) died with it, whatever ended it (slurmd killed, the
container's main process killed or OOM-killed, the pod deleted, its Kubernetes node gone).

Slurm cannot see that by itself. The host kernel's boot time is unchanged, so a new slurmd under the
same node name looks like a slurmd restart, after which job steps live on: slurmctld can keep the old
jobs RUNNING on the node (measured: 7½ minutes and counting). So before its slurmd registers, a new
container tells slurmctld what is true: the node went down, and the jobs it held died with it.
Setting the node DOWN is what Slurm itself does to a node that fails: each job on it ends as
NODE_FAIL, or is requeued when it may be (JobRequeue, --requeue). slurmd then starts with `-b` (its
boot time is its own start) and registers; with ReturnToService=2 the node is back in service at once.

The new container also takes the record over: its InstanceId becomes this container's, so the old
container, if it is still stopping, leaves the record alone (roles.forget_node). A drain (an admin's or
the operator's) or a FAIL is kept: its reason stays, so the node returns drained.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from .drains import CONTAINER_RESTARTED
from .scontrol import scontrol
from .supervise import log

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
        """Holding jobs of a previous container. A CLOUD node powering up holds the jobs it was powered
        up for, which wait for this container's slurmd."""
        return bool(BUSY & set(self.state)) and "POWERING_UP" not in self.state

    @classmethod
    def parse(cls, data: dict, name: str) -> Record | None:
        for node in data.get("nodes", []):
            if node.get("name") == name:
                return cls(name, tuple(node.get("state") or ()), node.get("reason") or "", node.get("instance_id") or "")
        return None


def record(name: str, env: dict[str, str] | None = None) -> tuple[Record | None, str]:
    """(the record, None if slurmctld has none; why slurmctld could not say, else ''). An answer
    with errors in it is no answer: "no record" is believed only from a slurmctld that answered."""
    try:
        proc = scontrol("--json", "show", "node", name, env=env)
    except subprocess.TimeoutExpired:
        return None, "scontrol timed out"
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = {}
    errors = [e.get("description") or e.get("error") or str(e) for e in data.get("errors", [])]
    if proc.returncode != 0 or errors or "nodes" not in data:
        return None, "; ".join(errors) or proc.stderr.strip() or f"exit code {proc.returncode}"
    return Record.parse(data, name), ""


def down_reason(node: Record) -> str:
    """A drained or failed node keeps its reason (it returns drained, as its owner left it)."""
    return node.reason if {"DRAIN", "FAIL"} & set(node.state) and node.reason else CONTAINER_RESTARTED


def previous_record(name: str, env: dict[str, str], wait: float, stop: Callable[[], bool],
                    poll: float = 2.0) -> Record | None:
    """The node's record in slurmctld (None: no record, a new node). Waits, saying why, while
    slurmctld does not answer (slurmd could not register then either), until `wait` seconds have
    passed or the container is told to stop."""
    deadline = time.monotonic() + wait
    said = ""
    while True:
        node, failure = record(name, env)
        if not failure:
            return node
        if time.monotonic() > deadline or stop():
            raise RuntimeError(f"slurmctld did not say whether node {name} held jobs (scontrol: {failure}); "
                               "slurmd is not started")
        if failure != said:
            log(f"waiting for slurmctld to say whether node {name} held jobs: {failure}")
            said = failure
        time.sleep(poll)


def take_over(name: str, instance: str, conf_server: str, wait: float, stop: Callable[[], bool]) -> str:
    """Before this container's slurmd registers: set the node DOWN if slurmctld still counts jobs on
    it, and make the record this container's (InstanceId). Returns what was done, for the log.
    Before slurmd runs there is no configuration here: scontrol fetches it from the conf server."""
    env = {**os.environ, "SLURM_CONF_SERVER": conf_server}
    node = previous_record(name, env, wait, stop)
    if node is None:
        return f"node {name} is new to slurmctld"
    state = "+".join(node.state)
    claim = [f"NodeName={name}", f"InstanceId={instance}"]
    if not node.busy:
        proc = scontrol("update", *claim, env=env)
        return f"node {name} held no job ({state})" + ("" if proc.returncode == 0 else
                                                      f"; its record not taken over: {proc.stderr.strip()}")
    proc = scontrol("update", *claim, "State=DOWN", f"Reason={down_reason(node)}", env=env)
    if proc.returncode != 0:  # a reply lost on the way back: the update may have been made
        after, _ = record(name, env)
        if not (after and "DOWN" in after.state and after.instance_id == instance):
            raise RuntimeError(f"cannot set node {name} DOWN for the jobs of the previous container: "
                               f"{proc.stderr.strip() or proc.returncode}; slurmd is not started")
    return f"node {name} was {state} from the previous container: set DOWN, its jobs end as node failures"


def forget_refusal(node: Record | None, failure: str, instance: str) -> str:
    """Why a stopping container must not delete its node's record ('' if it may): only a record
    slurmctld vouches for and that is still this container's. A pod deleted by force is replaced at
    once, and its successor may already have taken the record over."""
    if failure:
        return failure
    if node is None:
        return "no record"
    if node.instance_id != instance:
        return f"it is another container's now ({node.instance_id or 'none'})"
    return ""
