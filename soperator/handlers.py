"""kopf wiring only: every trigger calls the one reconcile function (reconcile/core.py), one pass at
a time per cluster (ClusterLocks).

- Triggers: `on.event` for SlurmClusters (a deleted one's Slurm client and metrics are forgotten),
  for the Jobs and StatefulSets the operator labels (their owner is reconciled), and for worker pods
  just bound that wait for their topology place; a resync loop (SOPERATOR_RESYNC_SECONDS) and, for
  autoscaling clusters, a demand loop (SOPERATOR_DEMAND_SECONDS, reconcile/demand.py), both started
  at startup instead of kopf timers, which would add a finalizer to every SlurmCluster. No progress
  annotations, no finalizer: nothing to clean up that owner references do not.
- Startup: kopf's watch timeouts, no peering, no cluster-wide scanning for a namespaced operator,
  the one Kubernetes client, and the /metrics server (TLS and RBAC-checked tokens, or plain on
  loopback: SOPERATOR_METRICS_AUTH).
- Liveness: /healthz fails while a pass has run SOPERATOR_STUCK_PASS_SECONDS.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from typing import Iterator

import kopf

from soperator.metrics import access, server
from soperator.api import GROUP, PLURAL, VERSION
from soperator.kube import Kube
from soperator.node.layout import COMPONENT_LABEL, INSTANCE_LABEL, MANAGED_BY_LABEL, OPERATOR, WORKER
from soperator.reconcile import reconcile
from soperator.reconcile.demand import poll_demand
from soperator.reconcile.topology import awaits_place
from soperator.slurm.cluster_client import SlurmClients

RESYNC_SECONDS = float(os.environ.get("SOPERATOR_RESYNC_SECONDS", "60"))
# How often autoscaling clusters' Slurm is asked whether a job waits for workers (reconcile/demand.py).
DEMAND_SECONDS = float(os.environ.get("SOPERATOR_DEMAND_SECONDS", "5"))
# Where the operator runs (the chart sets it from the pod's namespace): only its pods may reach the
# clusters' slurmrestd (render/network_policy.controller_ingress_policy).
OPERATOR_NAMESPACE = os.environ.get("SOPERATOR_NAMESPACE") or None
# A pass takes seconds; each call in it is bounded (kube.REQUEST_TIMEOUT, the Slurm and directory
# clients' own). One running this long is stuck on something unbounded and holds its cluster's lock:
# the liveness probe fails and the kubelet restarts the operator, whose passes start from what is.
STUCK_PASS_SECONDS = float(os.environ.get("SOPERATOR_STUCK_PASS_SECONDS", "600"))
# How long an event's pass waits for more events of its cluster before it starts (ClusterLocks). A
# second: nothing an operator does waits on it, and a burst of events becomes one pass.
GATHER_SECONDS = float(os.environ.get("SOPERATOR_GATHER_SECONDS", "1"))


class ClusterLocks:
    """One pass at a time per cluster. kopf runs sync handlers in a thread pool: a SlurmCluster's event
    and its StatefulSets' events (all at once after an operator restart) would reconcile one cluster
    twice at the same time, and both passes delete the same pod (seen on the real node: the second got
    404). A cluster's lock lives while a pass runs or waits for it, so the map holds only clusters being
    reconciled now: nothing is kept for a deleted one, and no pass gets a lock of its own while another
    holds the old one (a cluster deleted and made again under its name)."""

    def __init__(self, gather_seconds: float = 0.0) -> None:
        """`gather_seconds`: how long a coalescing pass waits before it takes the lock, gathering the
        events that follow the first (coalesce below)."""
        self.gather_seconds = gather_seconds
        self._locks: dict[tuple[str, str], list] = {}  # key: [lock, passes running or waiting, one waits to start]
        self._guard = threading.Lock()
        self._since: dict[tuple[str, str], float] = {}  # key: when the pass holding its lock began

    @contextlib.contextmanager
    def holding(self, namespace: str, name: str, coalesce: bool = False, gather: bool = True) -> Iterator[bool]:
        """Yields whether to run the pass. `coalesce`: a call that finds another pass of the cluster
        already waiting to start runs none (yields False), since that pass reads the cluster after
        this call's event anyway; and a pass that will run first waits gather_seconds (unless not
        `gather`: the periodic passes, which no burst precedes). A scale-out of N workers sends
        about N StatefulSet events; without this, each was a pass of its own over all N workers
        (the scale rig: 1,000 workers, 144 passes where a second's gathering makes 14,
        docs/benchmarks.md)."""
        key = (namespace, name)
        with self._guard:
            entry = self._locks.setdefault(key, [threading.Lock(), 0, False])
            skip = coalesce and entry[2]
            if not skip:
                entry[1] += 1
                entry[2] = entry[2] or coalesce
        if skip:
            yield False
            return
        try:
            if coalesce and gather and self.gather_seconds:
                time.sleep(self.gather_seconds)
            with entry[0]:
                if coalesce:
                    with self._guard:
                        entry[2] = False  # from here, an event may be newer than what this pass reads
                self._since[key] = time.monotonic()
                try:
                    yield True
                finally:
                    del self._since[key]
        finally:
            with self._guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]

    def longest_pass(self) -> tuple[str, float] | None:
        """'namespace/name' of the pass running longest now, and its seconds; None when none runs."""
        now = time.monotonic()
        running = [(f"{ns}/{name}", now - began) for (ns, name), began in list(self._since.items())]
        return max(running, key=lambda item: item[1], default=None)

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)


def new_memo(namespaces: list[str]) -> kopf.Memo:
    """The operator's state, which kopf hands to every handler (each object's memo is a shallow copy
    of this one, made when kopf first sees the object, after startup, so all share these): the one
    `kube` client, made in the startup handler (kopf starts no watch before it succeeds);
    `namespaces`, the ones `soperator run -n` watches (empty: cluster-wide; the resync lists only
    these, since the chart grants a Role per watched namespace and no cluster-wide list); the
    per-cluster `locks`; `slurm`, each cluster's Slurm client, kept between passes."""
    return kopf.Memo(kube=None, namespaces=list(namespaces), locks=ClusterLocks(GATHER_SECONDS), slurm=SlurmClients())


def _reconcile(memo: kopf.Memo, namespace: str, name: str, gather: bool = True) -> None:
    kube: Kube = memo.kube
    with memo.locks.holding(namespace, name, coalesce=True, gather=gather) as run:
        if not run:
            server.COALESCED.labels(namespace, name).inc()
            return
        _pass(memo, kube, namespace, name)


def _pass(memo: kopf.Memo, kube: Kube, namespace: str, name: str) -> None:
    with server.timed(namespace, name):
        # The body may be older than the last pass's writes: read it again under the lock.
        body = kube.get(f"{GROUP}/{VERSION}", "SlurmCluster", namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return  # deleted meanwhile: owner references take the children
        result = reconcile(kube, body, memo.slurm.connect, OPERATOR_NAMESPACE)
    if result.slurm is not None:
        server.SLURM.track(result.slurm)  # scrapes read its Slurm from now on


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_) -> None:
    # Watches silently stall without these (a known kopf/aiohttp issue): reconnect periodically.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.enabled = False  # we post our own events, on transitions only
    settings.peering.standalone = True  # one replica (Recreate strategy); no peering objects
    # Scanning lists Namespaces and CRDs cluster-wide; a namespaced operator has a Role per namespace
    # only (see the chart), and the CRD is installed with it, so it has nothing to discover.
    settings.scanning.disabled = bool(memo.namespaces)
    # Pods and nodes from watched lists: an idle pass then parses none of them (kube_watch.py).
    memo.kube = Kube.from_environment(watch=True)
    asyncio.get_running_loop().create_task(_resync_loop(memo))
    asyncio.get_running_loop().create_task(_demand_loop(memo))
    _serve_metrics(memo.kube)


def _serve_metrics(kube: Kube) -> None:
    """SOPERATOR_METRICS_AUTH=kubernetes (the default): TLS and RBAC-checked tokens on every interface;
    none: plain HTTP on loopback only."""
    port = int(os.environ.get("SOPERATOR_METRICS_PORT", "8080"))
    mode = os.environ.get("SOPERATOR_METRICS_AUTH", "kubernetes")
    server.count_kube_calls(kube)
    if mode == "none":
        server.serve(port)
    elif mode == "kubernetes":
        server.serve(port, access.TokenGate(kube),
                      access.server_context(os.environ.get("SOPERATOR_METRICS_CERT_DIR") or None))
    else:
        raise kopf.PermanentError(f"SOPERATOR_METRICS_AUTH: expected kubernetes or none, got {mode!r}")


@kopf.on.event(GROUP, VERSION, PLURAL)
def on_event(type: str, body: kopf.Body, memo: kopf.Memo, **_) -> None:  # noqa: A002 - kopf's argument name
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    if type == "DELETED" or body.get("metadata", {}).get("deletionTimestamp"):
        server.SLURM.forget(namespace, name)
        memo.slurm.forget(namespace, name)
        return  # owner references garbage-collect the children
    _reconcile(memo, namespace, name)


MANAGED = {MANAGED_BY_LABEL: OPERATOR}


@kopf.on.event("batch", "v1", "jobs", labels=MANAGED)
@kopf.on.event("apps", "v1", "statefulsets", labels=MANAGED)
def on_child_event(body: kopf.Body, memo: kopf.Memo, **_) -> None:
    """A child changed (the populate Job finished, pods became ready): reconcile its SlurmCluster."""
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "SlurmCluster":
            # _reconcile reads the owner itself (and skips it if deleted): its name is enough here.
            _reconcile(memo, body["metadata"]["namespace"], ref["name"])


@kopf.on.event("", "v1", "pods", labels={**MANAGED, COMPONENT_LABEL: WORKER},
                when=lambda body, **_: awaits_place(body))
def on_worker_bound(body: kopf.Body, memo: kopf.Memo, **_) -> None:
    """A worker just bound waits for its place in the topology before its slurmd registers."""
    _reconcile(memo, body["metadata"]["namespace"], body["metadata"]["labels"][INSTANCE_LABEL])


@kopf.on.probe(id="passes")
def passes(memo: kopf.Memo, **_) -> str:
    """/healthz: fails while a pass has run for STUCK_PASS_SECONDS."""
    longest = memo.locks.longest_pass()
    if longest and longest[1] >= STUCK_PASS_SECONDS:
        raise kopf.PermanentError(f"the pass for {longest[0]} has run {longest[1]:.0f} s: stuck")
    return f"longest pass running: {longest[0]}, {longest[1]:.0f} s" if longest else "no pass running"


async def _resync_loop(memo: kopf.Memo) -> None:
    """The periodic level-based pass: catches drift that produced no event on the SlurmCluster."""
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        try:
            items = await asyncio.to_thread(memo.kube.list_all, f"{GROUP}/{VERSION}", "SlurmCluster", memo.namespaces)
            for body in items:
                await asyncio.to_thread(_reconcile, memo, body["metadata"]["namespace"], body["metadata"]["name"], False)
        except Exception:  # noqa: BLE001 - keep resyncing; the error is logged and counted
            logging.getLogger("soperator").exception("resync failed")


async def _demand_loop(memo: kopf.Memo) -> None:
    """Autoscaling clusters' passes as soon as a job waits for workers (reconcile/demand.py)."""
    seen: dict = {}
    while True:
        await asyncio.sleep(DEMAND_SECONDS)
        try:
            await asyncio.to_thread(poll_demand, memo.slurm.elastic(), seen, lambda ns, name: _reconcile(memo, ns, name))
        except Exception:  # noqa: BLE001 - keep polling; the error is logged, the resync still runs
            logging.getLogger("soperator").exception("demand poll failed")
