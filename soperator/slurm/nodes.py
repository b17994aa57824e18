"""Slurm nodes as slurmrestd's data parser v0.0.44 gives them, and the one state each is counted in."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# What `sinfo` shows, in words: idle, alloc, mix, drng, drain, down, futr (never registered), and
# Slurm's own UNKNOWN (not yet heard from since slurmctld started). Never guessed from anything else.
NodeState = Literal["idle", "allocated", "mixed", "draining", "drained", "down", "notRegistered", "unknown"]
NODE_STATES: tuple[NodeState, ...] = ("idle", "allocated", "mixed", "draining", "drained", "down",
                                      "notRegistered", "unknown")
_BASE = {"IDLE": "idle", "ALLOCATED": "allocated", "MIXED": "mixed", "DOWN": "down", "FUTURE": "notRegistered",
         "ERROR": "down"}


# Power-saving flags, in the order a node's may be read: a request (POWER_UP, POWER_DOWN) first, the
# state it moves from (POWERED_DOWN) last; Slurm clears each as it sets the next.
POWER_FLAGS = ("POWER_UP", "POWERING_UP", "POWERING_DOWN", "POWER_DOWN", "POWERED_DOWN")


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _timestamp(value: object) -> int | None:
    """v0.0.44 writes times as {"set": bool, "infinite": bool, "number": seconds}; unset is None."""
    if isinstance(value, dict):
        return int(value["number"]) if value.get("set") and not value.get("infinite") else None
    return value if isinstance(value, int) else None


class SlurmNode(_Wire):
    name: str
    state: list[str] = Field(default_factory=list, description="base state first, then flags")
    reason: str = ""
    reason_changed_at: int | None = Field(default=None, description="when the reason was set (UNIX time)")
    features: list[str] = Field(default_factory=list)
    last_busy: int | None = Field(default=None, description="when it last ran a job, or registered (UNIX time); "
                                  "None once powered down")
    comment: str = ""
    topology: str = Field(default="", description="its place in topology.yaml's topologies (25.05+; set by a "
                          "registration's or an update's Topology=)")

    _reason_time = field_validator("reason_changed_at", "last_busy", mode="before")(lambda cls, v: _timestamp(v))

    @property
    def flags(self) -> list[str]:
        return self.state[1:]

    def power(self) -> str | None:
        """Where power saving has it (POWER_FLAGS); None for a node that is up (or never powered down)."""
        return next((f for f in POWER_FLAGS if f in self.flags), None)

    def category(self) -> NodeState:
        """As sinfo counts it: a DRAIN flag makes an idle node drained and a busy one draining."""
        base = self.state[0] if self.state else "UNKNOWN"
        if base not in _BASE:
            return "unknown"  # a drain flag on a node Slurm has not heard from says nothing about its jobs
        if "DRAIN" in self.flags and base not in ("DOWN", "FUTURE"):
            return "draining" if base in ("ALLOCATED", "MIXED") or "COMPLETING" in self.flags else "drained"
        return _BASE[base]  # type: ignore[return-value]


class _AllocatedNode(_Wire):
    name: str


class _AllocatedNodes(_Wire):
    allocation: list[_AllocatedNode] = Field(default_factory=list)


class _JobResources(_Wire):
    nodes: _AllocatedNodes = Field(default_factory=_AllocatedNodes)


def _return_code(value: object) -> int | None:
    """v0.0.44's exit_code: {"status": [...], "return_code": <a v0.0.44 number>}; None until it ended
    (or when it ended by a signal)."""
    if isinstance(value, dict):
        return _timestamp(value.get("return_code"))
    return value if isinstance(value, int) else None


class SlurmJob(_Wire):
    job_id: int
    name: str = ""
    job_state: list[str] = Field(default_factory=list)
    job_resources: _JobResources | None = None
    comment: str = ""
    exit_code: int | None = None

    _exit_code = field_validator("exit_code", mode="before")(lambda cls, v: _return_code(v))

    @property
    def nodes(self) -> list[str]:
        """The nodes it holds now (none while pending)."""
        return [a.name for a in self.job_resources.nodes.allocation] if self.job_resources else []

    def running(self) -> bool:
        """Holds its nodes: running, or still ending there (its steps not all gone)."""
        return bool({"RUNNING", "COMPLETING", "SUSPENDED"} & set(self.job_state))


class RestError(_Wire):
    error_number: int = 0
    error: str = ""
    description: str = ""


class NodesResponse(_Wire):
    nodes: list[SlurmNode] = Field(default_factory=list)
    last_update: int | None = Field(default=None, description="slurmctld's time of this list: the next update_time")
    errors: list[RestError] = Field(default_factory=list)

    _last_update = field_validator("last_update", mode="before")(lambda cls, v: _timestamp(v))


class JobsResponse(_Wire):
    jobs: list[SlurmJob] = Field(default_factory=list)
