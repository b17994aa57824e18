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


def named_nodes(*specs: str) -> dict[str, SlurmNode]:
    """By name; each spec `name=BASE[+FLAG...][:reason][@topology]`."""
    out = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        rest, _, topology = rest.partition("@") if "@" in rest else (rest, "", "")
        base, _, reason = rest.partition(":")
        out[name] = SlurmNode(name=name, state=base.split("+"), reason=reason, topology=topology)
    return out
