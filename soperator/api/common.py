"""Building blocks shared by every component of the SlurmCluster spec."""
from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel
from typing_extensions import Annotated

from soperator.api.fields import (DNS_SUBDOMAIN_PATTERN, LABEL_VALUE_PATTERN, MAX_SAFE_INTEGER, QUALIFIED_NAME_PATTERN,
                                  LabelMap, Quantity, cel, quantity_value)

# Free-form on purpose: Kubernetes' own Affinity type is large and versioned by the apiserver,
# which validates it when the pod template is applied.
FreeFormObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


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


# The resources a container may name: Kubernetes' own, huge pages of a size, or an extended resource
# (a device plugin's, e.g. nvidia.com/gpu), which is qualified by a domain other than kubernetes.io.
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_EXTENDED = rf"^{DNS_SUBDOMAIN_PATTERN[1:-1]}/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
_HUGEPAGES = r"^hugepages-[0-9]+(Ki|Mi|Gi)$"


def resource_kind(name: str) -> str | None:
    """'standard', 'hugepages' or 'extended'; None for a name Kubernetes refuses."""
    if name in STANDARD_RESOURCES:
        return "standard"
    if re.fullmatch(_HUGEPAGES[1:-1], name):
        return "hugepages"
    if (re.fullmatch(_EXTENDED[1:-1], name) and not name.startswith(("kubernetes.io/", "requests."))
            and len(name.rsplit("/", 1)[1]) <= 63):
        return "extended"
    return None


_NAMES_RULE = (f"self.all(k, k in {list(STANDARD_RESOURCES)} || k.matches(r'{_HUGEPAGES}') || (k.matches("
               f"r'{_EXTENDED}') && !k.startsWith('kubernetes.io/') && !k.startsWith('requests.')))",
               "a resource is cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified name "
               "(e.g. nvidia.com/gpu)")
ResourceMap = Annotated[dict[str, Quantity], Field(max_length=16, json_schema_extra=cel(_NAMES_RULE))]


class ResourceRequirements(ApiModel):
    requests: ResourceMap = Field(default_factory=dict)
    limits: ResourceMap = Field(default_factory=dict)

    @model_validator(mode="after")
    def _requests_within_limits(self) -> "ResourceRequirements":
        for field, values in (("requests", self.requests), ("limits", self.limits)):
            for name, amount in values.items():
                kind = resource_kind(name)
                if kind is None:
                    raise AtField((field, name), "not a resource: cpu, memory, ephemeral-storage, "
                                                 "hugepages-<size> or a domain-qualified name (e.g. nvidia.com/gpu)")
                if kind == "extended" and quantity_value(amount) % 1:
                    raise AtField((field, name), f"{amount!r}: a device (extended resource) is counted whole")
        for name, limit in self.limits.items():
            request = self.requests.get(name)
            if request is not None and quantity_value(request) > quantity_value(limit):
                raise ValueError(f"requests.{name} ({request}) exceeds limits.{name} ({limit})")
        for name, request in self.requests.items():
            limit = self.limits.get(name)
            if resource_kind(name) != "standard" and (limit is None or quantity_value(limit) != quantity_value(request)):
                raise AtField(("requests", name), f"a request for {name} needs an equal limit (Kubernetes does not "
                                                  "overcommit devices or huge pages)")
        return self




class Toleration(ApiModel):
    """Kubernetes' toleration, with the apiserver's rules: a key-less toleration matches every taint
    and needs operator Exists; Exists takes no value; tolerationSeconds is for NoExecute only."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("has(self.key) || (has(self.operator) && self.operator == 'Exists')",
         "operator must be Exists when key is empty (that matches every taint)"),
        ("!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
         "value must be empty when operator is Exists"),
        ("!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
         "tolerationSeconds applies to effect NoExecute only")))

    key: Optional[Annotated[str, Field(max_length=317, pattern=QUALIFIED_NAME_PATTERN)]] = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: Optional[Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]] = None
    effect: Optional[Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]] = None
    toleration_seconds: Optional[int] = Field(default=None, ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)

    @model_validator(mode="after")
    def _kubernetes_rules(self) -> "Toleration":
        if not self.key and self.operator != "Exists":
            raise AtField(("operator",), "must be Exists when key is empty (that matches every taint)")
        if self.operator == "Exists" and self.value:
            raise AtField(("value",), "must be empty when operator is Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise AtField(("tolerationSeconds",), "applies to effect NoExecute only")
        return self


class Scheduling(ApiModel):
    """Where a component's pods may run."""

    node_selector: LabelMap = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=32)
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
