"""Pods and Kubernetes nodes kept current by a watch, so that a reconcile pass reads them from memory.

Both grow with the cluster: at 1,000 workers, parsing the pod and node lists was 75 % of an idle
pass's CPU (the scale rig, docs/benchmarks.md), and a pass runs on every StatefulSet event. A list
is made once, then a watch from its resourceVersion applies each change; a watch the apiserver ends
is resumed from the last version seen, and one it can no longer resume (410 Gone) is replaced by a
new list. Until its first list is in, a cache answers None and the caller lists as before.

What a cache holds is what the apiserver last said, milliseconds late: the operator's own writes
to a pod are put in at once (`put`), so the next pass does not write them again. Objects are kept
slimmed (`slim_pod`, `slim_node`: what the operator reads of them; Kube's own lists give the same
form, so a test of a pass without a watch sees what the operator sees) and shared with the callers,
who only read them.
"""
from __future__ import annotations

import json
import logging
import threading
from typing import Callable

from kubernetes import client

log = logging.getLogger(__name__)
# The apiserver ends a watch after this long at most; the client waits a little longer for a line.
WATCH_SECONDS = 300
RETRY_SECONDS = 1
MAX_RETRY_SECONDS = 600


class Selector:
    """An equality-based label selector (`a=b,c!=d,e,!f`), the kind the operator writes. A set-based
    one (`in`, `notin`) is not matched here: `parse` answers None, and the caller lists from the API."""

    def __init__(self, terms: list[tuple[str, str, str | None]]):
        self.terms = terms

    @classmethod
    def parse(cls, text: str) -> "Selector | None":
        terms = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            if " in " in part or " notin " in part or "(" in part:
                return None
            if "!=" in part:
                key, value = part.split("!=", 1)
                terms.append(("!=", key.strip(), value.strip()))
            elif "=" in part:
                key, value = part.replace("==", "=").split("=", 1)
                terms.append(("=", key.strip(), value.strip()))
            elif part.startswith("!"):
                terms.append(("!", part[1:].strip(), None))
            else:
                terms.append(("exists", part, None))
        return cls(terms)

    def matches(self, labels: dict[str, str]) -> bool:
        for op, key, value in self.terms:
            have = labels.get(key)
            if (op == "=" and have != value) or (op == "!=" and have == value) or \
                    (op == "!" and key in labels) or (op == "exists" and key not in labels):
                return False
        return True


# The only fields of a pod's spec the operator reads (the node it runs on). The rest (containers,
# volumes) is most of a pod, and the operator renders it; it never reads it back.
POD_SPEC_KEPT = ("nodeName",)


def slim_pod(pod: dict) -> dict:
    """A pod as the operator keeps it, listed or watched alike: no managedFields, of its spec only
    POD_SPEC_KEPT. At a thousand workers this is most of the operator's memory."""
    (pod.get("metadata") or {}).pop("managedFields", None)
    spec = pod.get("spec") or {}
    pod["spec"] = {k: spec[k] for k in POD_SPEC_KEPT if k in spec}
    return pod


def slim_node(node: dict) -> dict:
    """A Kubernetes node as the operator keeps it: no managedFields, no list of the images it holds
    (tens of entries on a real node; the operator reads labels, taints, unschedulable, conditions)."""
    (node.get("metadata") or {}).pop("managedFields", None)
    (node.get("status") or {}).pop("images", None)
    return node


def _version(obj: dict) -> int:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return 0


def supersedes(obj: dict, held: dict | None, deleted_at: int = -1) -> bool:
    """Whether an answer replaces what the cache holds: not when a watch event already brought a
    later version, nor when the watch saw the object deleted after this version (`deleted_at`).
    Versions are etcd revisions, so they compare as numbers (Kubernetes documents them as opaque; one
    that is not a number counts as oldest, so the watch's copy wins)."""
    return _version(obj) > deleted_at and (held is None or _version(obj) >= _version(held))


class WatchedList:
    """Every object of one kind (in one namespace, or cluster-wide), by name."""

    def __init__(self, lister: Callable, what: str, slim: Callable[[dict], dict], **scope):
        self._lister, self._scope, self.what, self._slim = lister, scope, what, slim
        self._objects: dict[str, dict] = {}
        # name: the version of its deletion. A write's answer can come back after the watch told of the
        # object's deletion; it must not bring the object back.
        self._gone: dict[str, int] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()
        self._stopped = threading.Event()
        threading.Thread(target=self._run, name=f"watch {what}", daemon=True).start()

    def items(self) -> list[dict] | None:
        if not self.synced.is_set():
            return None
        with self._lock:
            return list(self._objects.values())

    def put(self, obj: dict) -> None:
        """An object as a write of ours returned it: newer than the cache's unless a watch event
        already brought a later one."""
        name = obj["metadata"]["name"]
        with self._lock:
            if supersedes(obj, self._objects.get(name), self._gone.get(name, -1)):
                self._objects[name] = self._slim(obj)

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        version, pause = None, RETRY_SECONDS
        while not self._stopped.is_set():
            try:
                if version is None:
                    version = self._list()
                    pause = RETRY_SECONDS
                version = self._watch(version)
            except Exception as exc:  # noqa: BLE001 - any failure: list again after a pause
                # Doubling, so a lasting refusal (no permission to list nodes) is logged now and then.
                log.warning("watch of %s failed (%s); listing again in %s s", self.what, exc, pause)
                version = None
                self._stopped.wait(pause)
                pause = min(pause * 2, MAX_RETRY_SECONDS)

    def _list(self) -> str:
        reply = self._lister(_preload_content=False, _request_timeout=(10, 120), **self._scope)
        body = json.loads(reply.data)
        with self._lock:
            self._objects = {o["metadata"]["name"]: self._slim(o) for o in body.get("items") or []}
            self._gone = {}
        self.synced.set()
        return body["metadata"]["resourceVersion"]

    def _watch(self, version: str) -> str | None:
        """Apply events until the apiserver ends the watch: the version to resume from, or None to
        list again (410 Gone: the history from `version` is compacted away)."""
        reply = self._lister(watch=True, resource_version=version, allow_watch_bookmarks=True,
                             timeout_seconds=WATCH_SECONDS, _preload_content=False,
                             _request_timeout=(10, WATCH_SECONDS + 30), **self._scope)
        try:
            for line in reply:
                if self._stopped.is_set():
                    return version
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise RuntimeError(f"{obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
                version = obj["metadata"].get("resourceVersion", version)
                if kind == "BOOKMARK":
                    continue
                name = obj["metadata"]["name"]
                with self._lock:
                    if kind == "DELETED":
                        self._objects.pop(name, None)
                        self._gone[name] = _version(obj)
                    # An event older than a write of ours already put in (put) is no news.
                    elif supersedes(obj, self._objects.get(name)):
                        self._objects[name] = self._slim(obj)
                        self._gone.pop(name, None)
        finally:
            reply.release_conn()
        return version


class WatchCache:
    """The operator's watched lists: pods per namespace and Kubernetes nodes, each started on first use."""

    def __init__(self, api_client: client.ApiClient):
        self._core = client.CoreV1Api(api_client)
        self._pods: dict[str, WatchedList] = {}
        self._nodes: WatchedList | None = None
        self._lock = threading.Lock()

    def pods(self, namespace: str, label_selector: str) -> list[dict] | None:
        selector = Selector.parse(label_selector)
        if selector is None:
            return None
        with self._lock:
            if namespace not in self._pods:
                self._pods[namespace] = WatchedList(self._core.list_namespaced_pod, f"pods in {namespace}",
                                                    slim_pod, namespace=namespace)
            watched = self._pods[namespace]
        items = watched.items()
        return None if items is None else [p for p in items if selector.matches(p["metadata"].get("labels") or {})]

    def nodes(self) -> list[dict] | None:
        with self._lock:
            if self._nodes is None:
                self._nodes = WatchedList(self._core.list_node, "nodes", slim_node)
        return self._nodes.items()

    def put_pod(self, pod: dict) -> None:
        watched = self._pods.get(pod["metadata"].get("namespace", ""))
        if watched is not None:
            watched.put(pod)

    def stop(self) -> None:
        for watched in [*self._pods.values(), *([self._nodes] if self._nodes else [])]:
            watched.stop()
