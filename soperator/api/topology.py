"""spec.topology: Slurm's network topology, read from the labels of the Kubernetes nodes the workers
run on. A tree names switch levels, top first; a block names the label whose value is a node's block
(an NVLink domain, a rack). The operator places each worker's Slurm node from its pod's Kubernetes
node (reconcile/topology.py), and places it again when the pod moves or the labels change."""
from __future__ import annotations

from typing import Optional

from pydantic import ConfigDict, Field, field_validator, model_validator
from typing_extensions import Annotated

from soperator.api.common import ApiModel, cel, refuse_duplicates
from soperator.api.fields import QUALIFIED_NAME_PATTERN, qualified_name_problem

# Slurm's topology/block keeps 16 levels of aggregated blocks (MAX_BLOCK_LEVELS).
MAX_BLOCK_LEVELS = 16


def label_key(key: str) -> str:
    problem = qualified_name_problem(key)
    if problem:
        raise ValueError(f"a Kubernetes label key: {problem}")
    return key


def label_keys(keys: list[str]) -> list[str]:
    """A list of label keys: each one Kubernetes takes, none twice."""
    for key in keys:
        label_key(key)
    refuse_duplicates(keys, "{!r} is listed twice")
    return keys


LabelKey = Annotated[str, Field(min_length=1, max_length=317, pattern=QUALIFIED_NAME_PATTERN,
                                description="a Kubernetes node label key, e.g. topology.example.com/leaf")]


class TreeTopology(ApiModel):
    levels: list[LabelKey] = Field(
        min_length=1, max_length=8, description="label keys of the switch levels, the top first and the leaf switch "
        "last: a Kubernetes node's values of them name its switches (values must name one switch each, whatever "
        "the level)", json_schema_extra=cel(("self.all(a, self.exists_one(b, b == a))", "a level is listed twice")))

    @field_validator("levels")
    @classmethod
    def _keys(cls, levels: list[str]) -> list[str]:
        return label_keys(levels)


def block_sizes_problem(sizes: list[int]) -> str | None:
    """Slurm's rule (topology/block, fatal at start otherwise): each size is the first times a power
    of two, below 2^16 times it, in increasing order."""
    for i, size in enumerate(sizes[1:], 1):
        ratio, rest = divmod(size, sizes[0])
        if rest or ratio & (ratio - 1) or ratio >= 1 << MAX_BLOCK_LEVELS or size <= sizes[i - 1]:
            return (f"{size}: each block size is larger than the one before and the first ({sizes[0]}) times a "
                    f"power of two below {1 << MAX_BLOCK_LEVELS} (Slurm refuses to start otherwise)")
    return None


class BlockTopology(ApiModel):
    label: LabelKey = Field(description="the label whose value names a Kubernetes node's block")
    block_sizes: list[Annotated[int, Field(ge=1, le=1 << 20)]] = Field(
        min_length=1, max_length=MAX_BLOCK_LEVELS, description="nodes in a base block, then the larger sizes a "
        "job may be placed in (each the first times a power of two); required: the blocks are filled as pods "
        "start, so Slurm cannot count them from its config", json_schema_extra=cel(
            ("self.isSorted() && self.all(a, self.exists_one(b, b == a))", "block sizes increase"),
            (f"self.all(s, s % self[0] == 0 && (s / self[0]) in {[1 << i for i in range(MAX_BLOCK_LEVELS)]})",
             "each block size is the first times a power of two")))

    @field_validator("label")
    @classmethod
    def _key(cls, label: str) -> str:
        return label_key(label)

    @field_validator("block_sizes")
    @classmethod
    def _sizes(cls, sizes: list[int]) -> list[int]:
        problem = block_sizes_problem(sizes)
        if problem:
            raise ValueError(problem)
        return sizes


class TopologySpec(ApiModel):
    """One of tree or block (Slurm 25.11 and later: its nodes join the topology as they register)."""

    model_config = ConfigDict(json_schema_extra=cel(("has(self.tree) != has(self.block)",
                                                     "one of tree or block")))

    tree: Optional[TreeTopology] = None
    block: Optional[BlockTopology] = None

    @model_validator(mode="after")
    def _one_kind(self) -> "TopologySpec":
        if (self.tree is None) == (self.block is None):
            raise ValueError("one of tree or block")
        return self

    @property
    def labels(self) -> list[str]:
        return list(self.tree.levels) if self.tree else [self.block.label]  # type: ignore[union-attr]
