"""The whole SlurmCluster object: identity, metadata and the name-length rule."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from soperator.api.common import ApiModel, AtField
from soperator.api.fields import AnnotationMap, LabelMap
from soperator.api.spec import MAX_STATEFUL_SET_NAME, SlurmClusterSpec
from soperator.api.status import SlurmClusterStatus

GROUP = "slurm.soperator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "SlurmCluster"
PLURAL = "slurmclusters"

# The longest derived name is "<name>-populate-jail" (14 chars) and StatefulSet pods carry a
# "controller-revision-hash: <sts>-<10 chars>" label, which must stay within 63 characters.
MAX_NAME_LENGTH = 40
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


class ObjectMeta(BaseModel):
    """The subset of metadata the renderers use; the rest is kept by the apiserver."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)
    namespace: str = Field(default="default", min_length=1, max_length=63,
                           pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    uid: Optional[str] = None
    generation: Optional[int] = None
    labels: LabelMap = Field(default_factory=dict)
    annotations: AnnotationMap = Field(default_factory=dict)


class SlurmCluster(ApiModel):
    api_version: Literal["slurm.soperator.dev/v1alpha1"] = API_VERSION
    kind: Literal["SlurmCluster"] = KIND
    metadata: ObjectMeta
    spec: SlurmClusterSpec = Field(default_factory=SlurmClusterSpec)
    status: Optional[SlurmClusterStatus] = None

    @model_validator(mode="after")
    def _node_set_names_fit(self) -> "SlurmCluster":
        for i, node_set in enumerate(self.spec.node_sets):
            name = f"{self.metadata.name}-{node_set.name}"
            if len(name) > MAX_STATEFUL_SET_NAME:
                raise AtField(("spec", "nodeSets", i, "name"),
                              f"StatefulSet name {name!r} is {len(name)} characters; at most "
                              f"{MAX_STATEFUL_SET_NAME} (metadata.name and the node set's name together)")
        return self

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace
