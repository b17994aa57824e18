"""Building blocks shared by every component of the SlurmCluster spec."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel
from typing_extensions import Annotated

from soperator.api.fields import LabelMap, Quantity, quantity_value

# Free-form on purpose: Kubernetes' own Affinity type is large and versioned by the apiserver,
# which validates it when the pod template is applied.
FreeFormObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


def cel(*rules: tuple[str, str] | dict) -> dict[str, Any]:
    """CEL rules for the CRD (`x-kubernetes-validations`): the apiserver's copy of a model rule."""
    return {"x-kubernetes-validations": [r if isinstance(r, dict) else {"rule": r[0], "message": r[1]}
                                         for r in rules]}


def unique_rule(field: str, message: str) -> tuple[str, str]:
    """CEL: no two items of this list share `field`."""
    return f"self.all(a, self.exists_one(b, b.{field} == a.{field}))", message


def first_duplicate(values: list) -> Any:
    """The least value that occurs more than once, or None: the Python side of unique_rule."""
    dupes = sorted({v for v in values if values.count(v) > 1})
    return dupes[0] if dupes else None


def refuse_duplicates(values: list, message: str = "{!r} is listed twice") -> None:
    """ValueError naming the least repeated value (formatted into `message`), if any repeats."""
    twice = first_duplicate(values)
    if twice:
        raise ValueError(message.format(twice))


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are errors, not silently dropped.
    Strict: a boolean or a quoted number is not an integer, as for the apiserver's schema."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              validate_default=True, strict=True)

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ResourceRequirements(ApiModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _requests_within_limits(self) -> "ResourceRequirements":
        for name, limit in self.limits.items():
            request = self.requests.get(name)
            if request is not None and quantity_value(request) > quantity_value(limit):
                raise ValueError(f"requests.{name} ({request}) exceeds limits.{name} ({limit})")
        return self


class Toleration(ApiModel):
    key: Optional[str] = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: Optional[str] = None
    effect: Optional[Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]] = None
    toleration_seconds: Optional[int] = None


class Scheduling(ApiModel):
    """Where a component's pods may run."""

    node_selector: LabelMap = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    affinity: Optional[FreeFormObject] = None


class ComponentBase(ApiModel):
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    scheduling: Scheduling = Field(default_factory=Scheduling)


class AtField(ValueError):
    """A cross-field error about one field, given relative to the model that checks it: the error
    then names that field (`spec.partitions[1].nodeFeature: …`), not the model."""

    def __init__(self, path: tuple[str | int, ...], message: str):
        super().__init__(message)
        self.path = path
