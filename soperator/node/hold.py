"""Hold the Slurm nodes while populate-jail overwrites the jail: drain them, wait until no job runs,
and afterwards resume exactly the nodes this drained.

Runs in the populate Job's pod (init container `hold-nodes` before the fill, container
`release-nodes` after it), with scontrol and the cluster's munge key. Ownership of a drain is its
reason: only nodes drained with POPULATE_HOLD are resumed, so an admin's drain stays. A node whose state
Slurm cannot vouch for (not responding, or scontrol failing) is never taken for idle: the hold waits.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

from .drains import POPULATE_HOLD, owned
from .scontrol import scontrol
from .supervise import log

# Base states in which a drained node runs nothing; COMPLETING and NOT_RESPONDING flags rule it out.
QUIET_BASES = {"IDLE", "DOWN", "FUTURE"}
_FIELD = re.compile(r"(?:^|\s)(NodeName|State|Reason)=(\S*)")


@dataclass(frozen=True)
class Node:
    name: str
    base: str
    flags: frozenset[str]
    reason: str

    @property
    def drained_by_us(self) -> bool:
        return owned(self.flags, self.reason, POPULATE_HOLD)

    @property
    def quiet(self) -> bool:
        """Drained, and Slurm vouches that nothing runs on it."""
        if "DRAIN" not in self.flags or self.base not in QUIET_BASES:
            return False
        if "COMPLETING" in self.flags:
            return False
        # A powered-down cloud node has no slurmd by design; any other silent node is unknown.
        return "NOT_RESPONDING" not in self.flags or "POWERED_DOWN" in self.flags


def parse_nodes(text: str) -> list[Node]:
    """`scontrol -o show node`: one node a line. The state reads BASE[+FLAG...], `*` marking no answer."""
    nodes = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "NodeName" not in fields or "State" not in fields:
            continue
        state = fields["State"]
        words = state.rstrip("*").split("+")
        flags = set(words[1:]) | ({"NOT_RESPONDING"} if state.endswith("*") else set())
        nodes.append(Node(fields["NodeName"], words[0], frozenset(flags), fields.get("Reason", "")))
    return nodes


def observe() -> list[Node] | None:
    """Every node slurmctld knows, or None when it did not answer (unknown, never 'drained')."""
    proc = scontrol("-o", "show", "node")
    if proc.returncode != 0:
        log(f"Slurm state unknown: scontrol: {proc.stderr.strip() or proc.returncode}")
        return None
    return parse_nodes(proc.stdout)


def _update(names: list[str], *settings: str) -> None:
    if names:
        proc = scontrol("update", f"NodeName={','.join(names)}", *settings)
        if proc.returncode != 0:
            log(f"scontrol update {' '.join(settings)} for {', '.join(names)}: {proc.stderr.strip()}")


def hold(poll: float = 5.0) -> None:
    """Drain every node not drained yet (ours), then wait until every node is quiet. No deadline: a
    job is never cut short for a repopulate; the log says what is being waited for."""
    said = ""
    while True:
        nodes = observe()
        if nodes is not None:
            _update([n.name for n in nodes if "DRAIN" not in n.flags], "State=DRAIN", f"Reason={POPULATE_HOLD}")
            busy = [n for n in nodes if not n.quiet]
            if not busy:
                log(f"held: {len(nodes)} node(s) drained and idle")
                return
            waiting = "waiting for " + ", ".join(f"{n.name} ({'+'.join([n.base, *sorted(n.flags)])})" for n in busy)
            if waiting != said:
                log(waiting)
                said = waiting
        time.sleep(poll)


def release(poll: float = 5.0) -> None:
    """Resume the nodes this hold drained, and only those."""
    while (nodes := observe()) is None:
        time.sleep(poll)
    # Sorted: slurmctld lists dynamic nodes in the order they registered, which varies from run to run.
    ours = sorted(n.name for n in nodes if n.drained_by_us)
    _update(ours, "State=RESUME")
    log(f"released: {', '.join(ours) or 'nothing held'}")
