"""What a namespace looks like when a wait on it ran out: the nodes' unhealthy conditions and taints
(disk pressure once kept pods off the test node for minutes), its pods, its latest events, and for each
pod not Ready its containers' states and the last lines of their logs (this run's and the one before).
A long e2e test that times out says why in its own failure, not only in logs deleted with its cluster."""
from __future__ import annotations

import json

LOG_LINES = 25
EVENTS = 30


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _container_lines(pod: dict) -> list[str]:
    lines = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = json.dumps(status.get("state") or {}, sort_keys=True)
        last = json.dumps(status.get("lastState") or {}, sort_keys=True)
        lines.append(f"  {status['name']}: restarts {status.get('restartCount', 0)}, state {state}, last {last}")
    return lines


def node_lines(nodes: dict) -> list[str]:
    """A line per node: the conditions that are not as a healthy node's (Ready true, every pressure
    false) and the node's taints."""
    lines = []
    for node in nodes.get("items") or []:
        conditions = (node.get("status") or {}).get("conditions") or []
        unhealthy = [f"{c['type']}={c['status']} ({c.get('message', '')})" for c in conditions
                     if (c["type"] == "Ready") != (c["status"] == "True")]
        taints = [f"{t['key']}:{t.get('effect')}" for t in (node.get("spec") or {}).get("taints") or []]
        lines.append(f"node {node['metadata']['name']}: unhealthy conditions {unhealthy or 'none'}, "
                     f"taints {taints or 'none'}")
    return lines


def namespace_report(kubectl, namespace: str, logs_of: tuple[str, ...] = ()) -> str:
    """`logs_of`: name prefixes of pods whose logs are wanted even when they are Ready (an operator
    that stopped moving looks Ready)."""
    out = node_lines(json.loads(kubectl("get", "nodes", "-o", "json", check=False).stdout or "{}"))
    out += [kubectl("-n", namespace, "get", "statefulsets,pods", "-o", "wide", check=False).stdout]
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json", check=False).stdout or "{}")
    items = sorted(events.get("items") or [], key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    out += [f"{e.get('lastTimestamp') or e.get('eventTime')} {e['involvedObject'].get('name')} {e.get('reason')}: "
            f"{(e.get('message') or '').strip()}" for e in items[-EVENTS:]]
    pods = json.loads(kubectl("-n", namespace, "get", "pods", "-o", "json", check=False).stdout or "{}")
    for pod in pods.get("items") or []:
        name = pod["metadata"]["name"]
        wanted = name.startswith(logs_of) if logs_of else False
        if not wanted and (_ready(pod) or (pod.get("status") or {}).get("phase") == "Succeeded"):
            continue
        out.append(f"--- pod {name}: ready {_ready(pod)}, phase {(pod.get('status') or {}).get('phase')}")
        out += _container_lines(pod)
        for previous in (False, True):
            log = kubectl("-n", namespace, "logs", name, "--all-containers", f"--tail={LOG_LINES}",
                          *(["--previous"] if previous else []), check=False)
            out.append(f"  {'previous ' if previous else ''}log:\n{log.stdout or log.stderr}")
    return "\n".join(out)
