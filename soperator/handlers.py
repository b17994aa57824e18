"""kopf wiring only: every trigger calls the one reconcile function.

Handlers are `on.event` (no progress annotations, no finalizer: nothing to clean up that owner
references do not) plus a resync loop started at startup, instead of kopf timers, which would add a
finalizer to every SlurmCluster.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading

import kopf

from soperator import metrics, metrics_access
from soperator.api import GROUP, PLURAL, VERSION
from soperator.kube import Kube
from soperator.reconcile import reconcile

RESYNC_SECONDS = float(os.environ.get("SOPERATOR_RESYNC_SECONDS", "60"))
_kube: Kube | None = None
# The namespaces `soperator run -n` watches; empty: cluster-wide. The resync lists only these, since
# the chart grants a Role per watched namespace and no cluster-wide list.
WATCHED_NAMESPACES: list[str] = []


def kube() -> Kube:
    global _kube
    if _kube is None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        _kube = Kube(client.ApiClient())
    return _kube


# kopf runs sync handlers in a thread pool: a SlurmCluster's event and its StatefulSets' events (all
# at once after an operator restart) would reconcile one cluster twice at the same time, and both
# passes delete the same pod (seen on the real node: the second got 404). One pass at a time per cluster.
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(namespace: str, name: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault((namespace, name), threading.Lock())


def _reconcile(body: dict) -> None:
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    with _lock(namespace, name), metrics.timed(namespace, name):
        # The body may be older than the last pass's writes: read it again under the lock.
        body = kube().get(f"{GROUP}/{VERSION}", "SlurmCluster", namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return  # deleted meanwhile: owner references take the children
        result = reconcile(kube(), body)
    if result.slurm is not None:
        metrics.SLURM.track(result.slurm)  # scrapes read its Slurm from now on


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_) -> None:
    # Watches silently stall without these (a known kopf/aiohttp issue): reconnect periodically.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.enabled = False  # we post our own events, on transitions only
    settings.peering.standalone = True  # one replica (Recreate strategy); no peering objects
    # Scanning lists Namespaces and CRDs cluster-wide; a namespaced operator has a Role per namespace
    # only (see the chart), and the CRD is installed with it, so it has nothing to discover.
    settings.scanning.disabled = bool(WATCHED_NAMESPACES)
    asyncio.get_running_loop().create_task(_resync_loop())
    _serve_metrics()


def _serve_metrics() -> None:
    """SOPERATOR_METRICS_AUTH=kubernetes (the default): TLS and RBAC-checked tokens on every interface;
    none: plain HTTP on loopback only."""
    port = int(os.environ.get("SOPERATOR_METRICS_PORT", "8080"))
    mode = os.environ.get("SOPERATOR_METRICS_AUTH", "kubernetes")
    if mode == "none":
        metrics.serve(port)
    elif mode == "kubernetes":
        metrics.serve(port, metrics_access.TokenGate(kube()),
                      metrics_access.server_context(os.environ.get("SOPERATOR_METRICS_CERT_DIR") or None))
    else:
        raise kopf.PermanentError(f"SOPERATOR_METRICS_AUTH: expected kubernetes or none, got {mode!r}")


@kopf.on.event(GROUP, VERSION, PLURAL)
def on_event(type: str, body: kopf.Body, **_) -> None:  # noqa: A002 - kopf's argument name
    if type == "DELETED" or body.get("metadata", {}).get("deletionTimestamp"):
        metrics.SLURM.forget(body["metadata"]["namespace"], body["metadata"]["name"])
        return  # owner references garbage-collect the children
    _reconcile(dict(body))


MANAGED = {"app.kubernetes.io/managed-by": "soperator"}


@kopf.on.event("batch", "v1", "jobs", labels=MANAGED)
@kopf.on.event("apps", "v1", "statefulsets", labels=MANAGED)
def on_child_event(body: kopf.Body, **_) -> None:
    """A child changed (the populate Job finished, pods became ready): reconcile its SlurmCluster."""
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "SlurmCluster":
            # _reconcile reads the owner itself (and skips it if deleted): its name is enough here.
            _reconcile({"metadata": {"namespace": body["metadata"]["namespace"], "name": ref["name"]}})


async def _resync_loop() -> None:
    """The periodic level-based pass: catches drift that produced no event on the SlurmCluster."""
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        try:
            items = await asyncio.to_thread(_list_clusters)
            for body in items:
                await asyncio.to_thread(_reconcile, body)
        except Exception:  # noqa: BLE001 - keep resyncing; the error is logged and counted
            logging.getLogger("soperator").exception("resync failed")


def _list_clusters() -> list[dict]:
    res = kube().dynamic.resources.get(api_version=f"{GROUP}/{VERSION}", kind="SlurmCluster")
    if not WATCHED_NAMESPACES:
        return res.get().to_dict().get("items", [])
    return [item for ns in WATCHED_NAMESPACES for item in res.get(namespace=ns).to_dict().get("items", [])]
