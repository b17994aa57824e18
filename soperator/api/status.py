"""The observed state the operator writes back: the `status` of a SlurmCluster."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from soperator.api.common import ApiModel

Phase = Literal["Pending", "Populating", "Provisioning", "Ready", "Degraded", "Error"]


class Condition(ApiModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(default="", pattern=r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$")
    message: str = ""
    last_transition_time: Optional[str] = None
    observed_generation: Optional[int] = None


class ComponentStatus(ApiModel):
    desired: int = 0
    ready: int = 0


class SlurmNodeCounts(ApiModel):
    """Slurm nodes by state, as sinfo shows them; notRegistered: a worker pod with no live Slurm node."""

    idle: int = 0
    allocated: int = 0
    mixed: int = 0
    draining: int = 0
    drained: int = 0
    down: int = 0
    not_registered: int = 0
    unknown: int = 0


class ScaleInStatus(ApiModel):
    """A scale-in under way: the StatefulSet stays above `replicas` until its leaving nodes run nothing."""

    replicas: int = Field(description="the spec's count, reached when the nodes below have drained")
    waiting_for: list[str] = Field(default_factory=list, description="leaving nodes still running jobs")
    jobs: Optional[int] = Field(default=None, description="how many jobs still run on them (absent: unknown)")
    message: str = ""


class AutoscaleStatus(ApiModel):
    """An autoscaling node set: what demand asks for, and why."""

    replicas: int = Field(description="the workers demand asks for now (desired follows, drain-first when lower)")
    message: str = ""
    powering_up: list[str] = Field(default_factory=list, description="nodes Slurm powered up for jobs, waiting "
                                                                      "for their pods")
    idle_since: dict[str, str] = Field(default_factory=dict, description="running workers with no job, since when "
                                                                         "(released after autoscale.idleSeconds)")
    powered_down: int = Field(default=0, description="Slurm records of the node set powered down: room to grow")


class NodeSetStatus(ApiModel):
    name: str
    desired: int = 0
    ready: int = 0
    scale_in: Optional[ScaleInStatus] = None
    autoscale: Optional[AutoscaleStatus] = None
    slurm: Optional[SlurmNodeCounts] = Field(default=None, description="absent until Slurm was first reached")


class ReleaseStatus(ApiModel):
    """Which Slurm release each part runs, as its pods and StatefulSets say: two while it moves (see
    condition SlurmUpgraded)."""

    wanted: str = Field(description="spec.slurmVersion")
    config: str = Field(description="the release slurm.conf is written for: the oldest daemon's or jail client's")
    accounting: list[str] = Field(default_factory=list, description="slurmdbd and its database")
    controller: list[str] = Field(default_factory=list, description="slurmctld and slurmrestd")
    workers: list[str] = Field(default_factory=list)
    login: list[str] = Field(default_factory=list)
    jail: list[str] = Field(default_factory=list, description="the jail's Slurm clients: the release it was last "
                                                           "populated from (populateJail.overwrite refills it)")


class HealthCheckStatus(ApiModel):
    """An active check (spec.healthCheck.active): its last round and what it found."""

    name: str
    last_round: Optional[str] = Field(default=None, description="when its last round started (RFC 3339)")
    running: dict[str, int] = Field(default_factory=dict, description="node: its check job, while they run")
    passed: int = Field(default=0, description="nodes that passed in the last round")
    skipped: int = Field(default=0, description="check jobs cancelled since this round began: still pending when a "
                                               "round was due, their nodes unchecked (an event names each)")
    failed: dict[str, str] = Field(default_factory=dict, description="node: why it failed, until it passes this "
                                   "check again")


class SlurmClusterStatus(ApiModel):
    phase: Optional[Phase] = None
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: Optional[int] = None
    controller: ComponentStatus = Field(default_factory=ComponentStatus)
    workers: ComponentStatus = Field(default_factory=ComponentStatus, description="every node set together")
    node_sets: list[NodeSetStatus] = Field(default_factory=list)
    slurm_nodes: Optional[SlurmNodeCounts] = Field(
        default=None, description="every node set together, as last read from Slurm (see condition SlurmReachable)")
    login: ComponentStatus = Field(default_factory=ComponentStatus)
    login_endpoint: Optional[str] = None
    slurm_release: Optional[ReleaseStatus] = None
    health_checks: list[HealthCheckStatus] = Field(default_factory=list)
