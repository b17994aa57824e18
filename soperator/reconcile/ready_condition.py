"""Why workers or login nodes do not start when their node cannot give them the cgroups they need
(Slurm's cgroup plugins, login sessions' limits) or, in a user namespace, the /dev/fuse that mounts
images: the container says so in its termination message (soperator/node/cgroups.py,
session_limits.py, roles.open_fuse_to_users), which names the node and what it lacks; the
WorkersReady or LoginReady condition carries it, so `kubectl get slurmcluster` shows the cause."""
from __future__ import annotations

from soperator.node.layout import NODE_REFUSALS
from soperator.reconcile.conditions import Cond
from soperator.reconcile.pod_status import last_termination


# Named in the condition, at most; the rest counted (the status is one object).
SHOWN = 3


def node_refusals(pods: list[dict]) -> list[tuple[str, str]]:
    """(reason, '<pod>: <what its node lacks>') for each pod whose container last stopped for that and
    is not running ready since."""
    found = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("ready"):
                continue
            message = last_termination(cs).get("message") or ""
            for start, reason in NODE_REFUSALS.items():
                if start in message:
                    found.append((reason, f"{pod['metadata']['name']}: {message.split(start, 1)[1].strip()[:512]}"))
    return found


def ready_condition(label: str, ready: int, desired: int, pods: list[dict]) -> Cond:
    """`<label>Ready` for a component's pods; its reason the first refusal's, when pods were refused."""
    kind = f"{label}Ready"
    if ready >= desired:
        return Cond(kind, True, "AllReady", f"{ready}/{desired} ready")
    refusals = node_refusals(pods)
    if refusals:
        more = f"; and {len(refusals) - SHOWN} more" if len(refusals) > SHOWN else ""
        return Cond(kind, False, refusals[0][0],
                    f"{ready}/{desired} ready; " + "; ".join(text for _, text in refusals[:SHOWN]) + more)
    return Cond(kind, False, "NotReady", f"{ready}/{desired} ready")
