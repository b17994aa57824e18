"""Each worker's place in Slurm's topology, from the labels of the Kubernetes node its pod runs on:
pure, the worker pods, the Kubernetes nodes and Slurm's nodes in, the places to set out.

A tree's place is the path of switches from topology.yaml's root down to the leaf, one switch per
level label (`default:_root:spine-1:leaf-3`): Slurm makes a switch the first time a node is placed
under it, so a new leaf needs no reconfigure. A block's place is its block (`default:nvl-7`), which
topology.yaml must list: the blocks rendered are the label's values on every Kubernetes node.

A bound pod is told its place (PLACE_ANNOTATION, which a fixed node set's slurmd registers with), and
a node is placed through slurmrestd once its slurmd registered elsewhere (a CLOUD record, a slurmd
that did not wait for its place; Slurm keeps the place across restarts and reconfigures), and again
when its Kubernetes node's labels change; a pod that moves is a new registration on its new node. A
node whose Kubernetes node lacks a level's label, or whose switch name is taken by another place in
the tree, is left where it is and named in the condition.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from soperator.api.topology import TopologySpec
from soperator.node.layout import PLACE_ANNOTATION, PLACEMENT_VOLUME
from soperator.reconcile.conditions import Cond
from soperator.reconcile.slurm_view import UNREGISTERED, labels_of
from soperator.render.configs import NO_BLOCK, ROOT_SWITCH, TOPOLOGY_NAME, UNPLACED
from soperator.slurm import SlurmNode


@dataclass(frozen=True)
class Placement:
    wanted: dict[str, str] = field(default_factory=dict)  # Slurm node: its place, for those that have one
    moves: dict[str, str] = field(default_factory=dict)  # of those, the ones Slurm has elsewhere
    unplaced: dict[str, str] = field(default_factory=dict)  # Slurm node: why it has no place
    hosts: dict[str, str] = field(default_factory=dict)  # Slurm node: its Kubernetes node
    annotate: dict[str, str] = field(default_factory=dict)  # bound pod: the place to write on it


def _path(topology: TopologySpec, labels: dict[str, str]) -> tuple[str, ...] | str:
    """The label values that place a Kubernetes node, top first; or why it has none."""
    missing = [key for key in topology.labels if not labels.get(key)]
    if missing:
        return f"no label {missing[0]}"
    return tuple(labels[key] for key in topology.labels)


def _clashes(paths: list[tuple[str, ...]]) -> dict[str, str]:
    """Switch names a tree would give two places (Slurm names a switch once): name -> why."""
    above: dict[str, tuple[str, ...]] = {}
    out = {}
    for path in sorted(set(paths)):
        for depth, name in enumerate(path):
            if above.setdefault(name, path[:depth]) != path[:depth]:
                out[name] = (f"switch {name} is at {' > '.join(above[name] + (name,))} and at "
                             f"{' > '.join(path[:depth + 1])}")
    return out


def place(topology: TopologySpec, path: tuple[str, ...]) -> str:
    """The place Slurm takes (REST's topology_str, slurmd's --conf Topology=)."""
    units = (ROOT_SWITCH, *path) if topology.tree else path
    return ":".join((TOPOLOGY_NAME, *units))


def awaits_place(pod: dict) -> bool:
    """A bound pod whose slurmd reads its place (render/worker.py) and has none on it yet: the
    operator's watch reconciles at its binding rather than at the next resync."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    return bool(spec.get("nodeName")) and not meta.get("deletionTimestamp") \
        and PLACE_ANNOTATION not in (meta.get("annotations") or {}) \
        and any(v.get("name") == PLACEMENT_VOLUME for v in spec.get("volumes") or [])


def plan_topology(topology: TopologySpec | None, pods: list[dict], kube_nodes: dict[str, dict] | None,
                  slurm: dict[str, SlurmNode] | None) -> Placement:
    """`kube_nodes`: every Kubernetes node by name (None: not readable); `slurm`: Slurm's nodes by name
    (None: unknown). No topology or no Kubernetes nodes: nothing is planned; Slurm unknown: the pods'
    places only."""
    if topology is None or kube_nodes is None:
        return Placement()
    paths = {name: _path(topology, labels_of(node)) for name, node in kube_nodes.items()}
    clashes = _clashes([p for p in paths.values() if isinstance(p, tuple)]) if topology.tree else {}
    out = Placement()
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name, host = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        if not host or host not in kube_nodes:
            continue
        path = paths[host]
        clash = next((clashes[s] for s in path if s in clashes), None) if isinstance(path, tuple) else None
        where = None if isinstance(path, str) or clash else place(topology, path)
        meta = pod["metadata"]
        if where and not meta.get("deletionTimestamp") and (meta.get("annotations") or {}).get(PLACE_ANNOTATION) != where:
            out.annotate[name] = where
        node = (slurm or {}).get(name)
        if node is None or node.category() in UNREGISTERED:
            continue
        out.hosts[name] = host
        if where is None:
            out.unplaced[name] = f"{host}: {clash or path}"
            continue
        out.wanted[name] = where
        if node.topology != where:
            out.moves[name] = where
    return out


def topology_blocks(topology: TopologySpec | None, kube_nodes: dict[str, dict] | None,
                    live_yaml: str | None) -> tuple[str, ...]:
    """The blocks topology.yaml lists: the block label's values on the Kubernetes nodes; while they
    cannot be read, the ones it lists now (no block a node is in may go)."""
    if topology is None or topology.block is None:
        return ()
    if kube_nodes is not None:
        return tuple(sorted({v for n in kube_nodes.values() if (v := labels_of(n).get(topology.block.label))}))
    try:
        listed = (yaml.safe_load(live_yaml or "") or [{}])[0].get("block", {}).get("blocks") or []
    except (yaml.YAMLError, AttributeError, IndexError, KeyError):
        return ()
    return tuple(sorted(str(b["block"]) for b in listed if isinstance(b, dict) and b.get("block") not in (NO_BLOCK, UNPLACED)))


def topology_condition(topology: TopologySpec | None, plan: Placement, failed: dict[str, str],
                       known: bool) -> Cond | None:
    """Topology: every registered worker placed as its Kubernetes node's labels say, or which are not
    and why. `failed`: Slurm refused a place (node: error); `known`: Slurm's and Kubernetes' nodes were read."""
    if topology is None:
        return None
    if not known:
        return Cond("Topology", None, "Unknown", "Slurm's nodes or the Kubernetes nodes could not be read")
    trouble = {**plan.unplaced, **{n: f"Slurm refused {plan.moves[n]}: {e}" for n, e in failed.items()}}
    if trouble:
        return Cond("Topology", False, "Unplaced", "; ".join(f"{n} ({why})" for n, why in sorted(trouble.items())))
    kind = f"tree of {', '.join(topology.labels)}" if topology.tree else f"blocks of {topology.labels[0]}"
    return Cond("Topology", True, "Placed", f"{len(plan.wanted)} registered workers placed by their Kubernetes "
                                            f"nodes' labels ({kind})")
