"""Slurm nodes for planner tables, written the way a person reads sinfo."""
from __future__ import annotations

from soperator.slurm import SlurmNode


def nodes_in_states(prefix: str, *states: str) -> dict[str, SlurmNode]:
    """`<prefix>-<ordinal>` by name; `states` per ordinal as `BASE[+FLAG...][:reason]`, '' for no node."""
    out = {}
    for i, state in enumerate(states):
        if state:
            base, _, reason = state.partition(":")
            out[f"{prefix}-{i}"] = SlurmNode(name=f"{prefix}-{i}", state=base.split("+"), reason=reason)
    return out
