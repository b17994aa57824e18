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


class WorkersStatus(ComponentStatus):
    # The label selector string the scale subresource exposes, so an HPA can target workers.
    selector: Optional[str] = None


class SlurmClusterStatus(ApiModel):
    phase: Optional[Phase] = None
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: Optional[int] = None
    controller: ComponentStatus = Field(default_factory=ComponentStatus)
    workers: WorkersStatus = Field(default_factory=WorkersStatus)
    login: ComponentStatus = Field(default_factory=ComponentStatus)
    login_endpoint: Optional[str] = None
