"""The operator chart's cgroup-delegate DaemonSet: on its node, each soperator worker or login pod that
runs in a user namespace (a node set's or spec.login's `hostUsers: false`) gets its container's cgroups
delegated (host.py) once the kubelet reports the container running. The worker waits for that before
it starts slurmd (soperator/node/cgroups.py), the login node before sshd takes sessions
(soperator/node/session_limits.py).

A container is delegated once, when it starts, to the root of the uid map of its first process (a map
of a whole pod range: a job's or a session's own nested namespace maps a few ids and is never taken
for it), so no job or session decides whose it is. A restarted container is a new one (a new ID)."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from soperator.cgroup_delegate import host
from soperator.node.layout import COMPONENT_LABEL, LOGIN, MANAGED_BY_LABEL, OPERATOR, WORKER

log = logging.getLogger("soperator.cgroup_delegate")

NODE_SELECTOR = f"{COMPONENT_LABEL} in ({WORKER},{LOGIN}),{MANAGED_BY_LABEL}={OPERATOR}"
# The server ends each watch before the client's read timeout (kube.REQUEST_TIMEOUT); the next one
# begins with every pod again.
WATCH_SECONDS = 50
RETRY_SECONDS = 1.0
# A container whose cgroup or first process has not shown up after this long is given up (logged).
PENDING_SECONDS = 300.0


@dataclass(frozen=True)
class Container:
    namespace: str
    pod: str
    pod_uid: str
    container_id: str


def running_containers(pod: dict) -> list[Container]:
    """The running containers of a pod in a user namespace of its own; none for any other pod."""
    if pod.get("spec", {}).get("hostUsers", True) is not False:
        return []
    meta = pod["metadata"]
    found = []
    for status in pod.get("status", {}).get("containerStatuses") or []:
        runtime_id = status.get("containerID") or ""
        if "running" in (status.get("state") or {}) and "://" in runtime_id:
            found.append(Container(meta["namespace"], meta["name"], meta["uid"], runtime_id.split("://", 1)[1]))
    return found


class Agent:
    def __init__(self, cgroup_root: str, proc_root: str):
        self.cgroup_root = cgroup_root
        self.proc_root = proc_root
        self.lock = threading.Lock()
        self.pending: dict[str, Container] = {}  # by container ID
        self.since: dict[str, float] = {}  # when each pending one was first seen
        self.done: dict[str, Container] = {}

    def saw(self, event: str, pod: dict) -> None:
        """A watch event: running containers become pending; a deleted pod's are forgotten."""
        with self.lock:
            if event == "DELETED":
                uid = pod["metadata"]["uid"]
                for table in (self.pending, self.done):
                    for cid in [c for c, container in table.items() if container.pod_uid == uid]:
                        del table[cid]
                        self.since.pop(cid, None)
                return
            for container in running_containers(pod):
                cid = container.container_id
                if cid not in self.done and cid not in self.pending:
                    self.pending[cid] = container
                    self.since[cid] = time.monotonic()

    def delegate_pending(self) -> None:
        with self.lock:
            pending = [(cid, container, self.since[cid]) for cid, container in self.pending.items()]
        for cid, container, since in pending:
            name = f"{container.namespace}/{container.pod} (container {cid[:12]})"
            try:
                plan = host.plan(self.cgroup_root, self.proc_root, container.pod_uid, cid)
                if plan is None:
                    if time.monotonic() - since > PENDING_SECONDS:
                        log.error("%s: no cgroup with a process found in %.0f s; given up", name, PENDING_SECONDS)
                        self._finish(cid, container)
                    continue
                changed = host.apply(plan)
            except (host.DelegationError, OSError) as exc:
                log.error("%s: not delegated: %s", name, exc)
                self._finish(cid, container)
                continue
            log.info("%s: cgroups %s to uid %d gid %d: %s", name, "delegated" if changed else "already delegated",
                     plan.uid, plan.gid, ", ".join(plan.directories))
            self._finish(cid, container)

    def _finish(self, cid: str, container: Container) -> None:
        with self.lock:
            self.pending.pop(cid, None)
            self.since.pop(cid, None)
            self.done[cid] = container


def watch_forever(kube, node_name: str, agent: Agent, stop: threading.Event) -> None:
    selector = f"spec.nodeName={node_name}"
    while not stop.is_set():
        try:
            for event, pod in kube.watch_pods(selector, NODE_SELECTOR, WATCH_SECONDS):
                agent.saw(event, pod)
                if stop.is_set():
                    return
        except Exception as exc:  # the apiserver away, a dropped connection: watch again
            log.warning("watching pods on %s: %s; again in 5 s", node_name, exc)
            stop.wait(5)


def run(kube, node_name: str, cgroup_root: str, proc_root: str, stop: threading.Event) -> int:
    agent = Agent(cgroup_root, proc_root)
    host.hierarchies(cgroup_root)  # a node without the hierarchies fails here, in the pod's log
    watcher = threading.Thread(target=watch_forever, args=(kube, node_name, agent, stop), daemon=True)
    watcher.start()
    log.info("delegating the cgroups of user-namespaced workers and login pods on %s (%s)", node_name, cgroup_root)
    while not stop.wait(RETRY_SECONDS):
        agent.delegate_pending()
    return 0
