"""The operator's only door to the Kubernetes API: get, list, server-side apply, create, delete, status,
pod conditions, events.

Every call goes through here, so a test or bench can count them (`writes`, and `calls` by verb and kind).
"""
from __future__ import annotations

import collections
import datetime
import functools
import json
import threading
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ForbiddenError, NotFoundError

from soperator.kube_watch import WatchCache, slim_node, slim_pod

FIELD_MANAGER = "soperator"
_READS = ("get", "list", "watch")
# (connect, read) seconds for every call that sets none. The client's own default is to wait for
# ever: one stalled answer (a pod's log the kubelet never sends, say) would hold a pass, and with it
# the cluster's lock, so every later pass would wait behind it and the cluster's status freeze (as
# seen once in CI, cause not proven). Watches are
# kopf's own connections, with their own timeouts (handlers.configure).
REQUEST_TIMEOUT = (10.0, 60.0)
# Writes in flight at once when a pass makes many of one kind (a condition on each of a thousand pods
# after one Slurm-wide change): one at a time, 1,000 took 8 s of a pass on the scale rig.
WRITERS = 8


def _timed(request, timeout: tuple[float, float]):
    request = getattr(request, "__wrapped__", request)  # one client shared by two Kubes: wrapped once

    @functools.wraps(request)
    def call(*args, _request_timeout=None, **kwargs):
        return request(*args, _request_timeout=_request_timeout or timeout, **kwargs)
    return call


def _json(response) -> dict:
    """A read's answer as plain JSON. The dynamic client's own objects (ResourceInstance, then
    `to_dict()`) walk every field twice in Python: 80 % of an idle pass's CPU at 200 workers
    (measured with the scale rig, docs/benchmarks.md)."""
    return json.loads(response.data)


def tally(calls: "collections.Counter[tuple[str, str]]") -> tuple[int, int]:
    """(reads, writes) among counted calls: `Kube.calls`, or the difference of two of its copies."""
    reads = sum(n for (verb, _), n in calls.items() if verb in _READS)
    return reads, sum(calls.values()) - reads


class Kube:
    def __init__(self, api_client: client.ApiClient, timeout: tuple[float, float] = REQUEST_TIMEOUT,
                 watch: bool = False):
        """`watch`: pods and Kubernetes nodes read from watched lists (kube_watch.py) once those are in."""
        # Every call, typed or dynamic, goes through this one method of the client's REST layer.
        api_client.rest_client.request = _timed(api_client.rest_client.request, timeout)
        self.api_client = api_client
        self.dynamic = DynamicClient(api_client)
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()  # (verb, kind): count
        self._counting = threading.Lock()  # `many` counts from several threads
        self.cached: collections.Counter[str] = collections.Counter()  # kind: reads answered by a watch
        self.watched = WatchCache(api_client) if watch else None

    def _res(self, api_version: str, kind: str):
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    @classmethod
    def from_environment(cls, watch: bool = False) -> "Kube":
        """In a pod, its service account; elsewhere, the kubeconfig (KUBECONFIG or ~/.kube/config)."""
        from kubernetes import config

        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        return cls(client.ApiClient(), watch=watch)

    def _count(self, verb: str, kind: str) -> None:
        with self._counting:
            self.calls[verb, kind] += 1

    def _count_cached(self, kind: str) -> None:
        with self._counting:
            self.cached[kind] += 1

    def counts(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        """Copies of `calls` and `cached`, taken while no call is being counted (/metrics reads them)."""
        with self._counting:
            return dict(self.calls), dict(self.cached)

    def many(self, call, args: list[tuple]) -> list:
        """`call(*a)` for each of `args`, WRITERS at a time; the answers in order. An exception from
        any call is raised once all have ended."""
        if len(args) <= 1:
            return [call(*a) for a in args]
        with ThreadPoolExecutor(min(WRITERS, len(args))) as pool:
            return list(pool.map(lambda a: call(*a), args))

    @property
    def writes(self) -> int:
        return tally(self.calls)[1]

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
        self._count("get", kind)
        try:
            return _json(self._res(api_version, kind).get(name=name, namespace=namespace, serialize=False))
        except NotFoundError:
            return None

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str) -> list[dict]:
        pods = (api_version, kind) == ("v1", "Pod")
        watched = self.watched.pods(namespace, label_selector) if pods and self.watched is not None else None
        if watched is not None:
            self._count_cached(kind)
            return watched
        self._count("list", kind)
        res = self._res(api_version, kind).get(namespace=namespace, label_selector=label_selector, serialize=False)
        items = _json(res).get("items") or []
        return [slim_pod(p) for p in items] if pods else items

    def nodes(self) -> dict[str, dict] | str:
        """The Kubernetes nodes by name, or why they cannot be read (the chart's ClusterRole left out)."""
        watched = self.watched.nodes() if self.watched is not None else None
        if watched is not None:
            self._count_cached("Node")
            return {n["metadata"]["name"]: n for n in watched}
        self._count("list", "Node")
        try:
            items = [slim_node(n) for n in _json(self._res("v1", "Node").get(serialize=False)).get("items") or []]
        except ForbiddenError as exc:
            return f"not allowed to list nodes: {exc.summary()}"
        return {n["metadata"]["name"]: n for n in items}

    def watch_pods(self, field_selector: str, label_selector: str, seconds: int):
        """The pods' events, each (type, pod as a dict), for `seconds` (the server ends the watch, before
        this client's read timeout); the first ones list every matching pod (ADDED).

        From resourceVersion 0, what the apiserver's cache holds: without it the apiserver first waits
        for its cache to reach etcd's newest revision, and where etcd cannot report its progress
        (before 3.5.13; the test cluster's 3.4) that waits for the next pod event anywhere: 504s "Too
        large resource version" for 35 s on the two-node cluster. Events follow from there, so a
        pod's start is never missed."""
        from kubernetes import watch

        self._count("watch", "Pod")
        core = client.CoreV1Api(self.api_client)
        for event in watch.Watch().stream(core.list_pod_for_all_namespaces, field_selector=field_selector,
                                          label_selector=label_selector, timeout_seconds=seconds,
                                          resource_version="0"):
            yield event["type"], event["raw_object"]

    def list_all(self, api_version: str, kind: str, namespaces: list[str]) -> list[dict]:
        """Every object of a kind in these namespaces, or cluster-wide when none are given."""
        res = self._res(api_version, kind)
        if not namespaces:
            self._count("list", kind)
            return _json(res.get(serialize=False)).get("items") or []
        out = []
        for namespace in namespaces:
            self._count("list", kind)
            out += _json(res.get(namespace=namespace, serialize=False)).get("items") or []
        return out

    def apply(self, obj: dict) -> dict:
        """Server-side apply with our field manager; forced, since these fields are ours to own."""
        self._count("apply", obj["kind"])
        meta = obj["metadata"]
        return self._res(obj["apiVersion"], obj["kind"]).server_side_apply(
            body=obj, name=meta["name"], namespace=meta.get("namespace"), field_manager=FIELD_MANAGER,
            force_conflicts=True).to_dict()

    def create(self, obj: dict) -> dict:
        self._count("create", obj["kind"])
        return self._res(obj["apiVersion"], obj["kind"]).create(
            body=obj, namespace=obj["metadata"].get("namespace")).to_dict()

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        """False if it was gone already: what was asked for holds."""
        self._count("delete", kind)
        try:
            self._res(api_version, kind).delete(name=name, namespace=namespace,
                                                body={"propagationPolicy": "Background"})
        except NotFoundError:
            return False
        return True

    def patch(self, api_version: str, kind: str, namespace: str, name: str, patch: dict) -> None:
        """A merge patch of fields no rendered object holds (the replicas of a removed node set)."""
        self._count("patch", kind)
        self._res(api_version, kind).patch(name=name, namespace=namespace, body=patch,
                                           content_type="application/merge-patch+json")

    def patch_status(self, api_version: str, kind: str, namespace: str, name: str, status: dict) -> None:
        self._count("patch", f"{kind}/status")
        self._res(api_version, kind).status.patch(
            name=name, namespace=namespace, body={"status": status}, content_type="application/merge-patch+json")

    def patch_pod_condition(self, namespace: str, name: str, condition: dict) -> bool:
        """Set one condition of a pod's status; the kubelet keeps conditions of types it does not own.
        False if the pod is gone (deleted since it was listed): it has no condition left to set."""
        self._count("patch", "Pod/status")
        try:
            self._remember(self._res("v1", "Pod").status.patch(
                name=name, namespace=namespace, body={"status": {"conditions": [condition]}},
                content_type="application/strategic-merge-patch+json", serialize=False))
        except NotFoundError:
            return False
        return True

    def _remember(self, response) -> None:
        """A pod as our write left it, into the watched list: the next pass must not write it again
        because the watch had not yet brought the change."""
        if self.watched is not None:
            self.watched.put_pod(_json(response))  # slimmed there, if kept

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> bool:
        """Set annotations on a pod; False if it is gone (deleted since it was listed)."""
        return self._patch_pod_metadata(namespace, name, {"annotations": annotations})

    def label_pod(self, namespace: str, name: str, labels: dict[str, str | None]) -> bool:
        """Set labels on a pod (None removes one); False if it is gone (deleted since it was listed)."""
        return self._patch_pod_metadata(namespace, name, {"labels": labels})

    def _patch_pod_metadata(self, namespace: str, name: str, meta: dict) -> bool:
        self._count("patch", "Pod")
        try:
            self._remember(self._res("v1", "Pod").patch(name=name, namespace=namespace, body={"metadata": meta},
                                                        content_type="application/merge-patch+json", serialize=False))
        except NotFoundError:
            return False
        return True

    def patch_node(self, name: str, patch: dict) -> str | None:
        """Merge-patch a Kubernetes node; None when done, else why not (gone, or not allowed)."""
        self._count("patch", "Node")
        try:
            self._res("v1", "Node").patch(name=name, body=patch, content_type="application/merge-patch+json")
        except NotFoundError:
            return f"node {name} is gone"
        except ForbiddenError as exc:
            return f"not allowed to patch node {name}: {exc.summary()}"
        return None

    def log_tail(self, namespace: str, pod: str, container: str, lines: int = 40) -> str:
        """The container's last lines, else its previous run's (one waiting to restart has none);
        '' when neither can be read: no such pod (404) or no such run yet (400). Anything else, a
        403 above all, is raised: a missing permission must not pass for an empty log."""
        core = client.CoreV1Api(self.api_client)
        for previous in (False, True):
            self._count("get", "Pod/log")
            try:
                # The client gives None for an empty body (a pod with no log yet), not ''.
                return core.read_namespaced_pod_log(pod, namespace, container=container, tail_lines=lines,
                                                    limit_bytes=16384, previous=previous) or ""
            except client.ApiException as exc:
                if exc.status not in (400, 404):
                    raise
        return ""

    def review_token(self, token: str) -> tuple[str, list[str]] | None:
        """The user and groups a bearer token belongs to (TokenReview), or None if it is not valid."""
        review = client.AuthenticationV1Api(self.api_client).create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)))
        status = review.status
        if status is None or not status.authenticated or status.user is None:
            return None
        return status.user.username, list(status.user.groups or [])

    def may_get_path(self, user: str, groups: list[str], path: str) -> bool:
        """Whether RBAC lets this user `get` a non-resource URL (SubjectAccessReview)."""
        review = client.AuthorizationV1Api(self.api_client).create_subject_access_review(
            client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
                user=user, groups=groups, non_resource_attributes=client.V1NonResourceAttributes(
                    path=path, verb="get"))))
        return bool(review.status and review.status.allowed)

    def event(self, owner: dict, kind: str, reason: str, message: str) -> None:
        """A core/v1 Event on the SlurmCluster: `kubectl describe` shows it."""
        self._count("create", "Event")
        meta = owner["metadata"]
        now = datetime.datetime.now(datetime.timezone.utc).isoformat()
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta.get("uid")},
            "type": kind, "reason": reason, "message": message[:1024],
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "source": {"component": "soperator"}, "reportingComponent": "soperator",
        }
        self._res("v1", "Event").create(body=body, namespace=meta["namespace"])
