"""The operator's /metrics, through prometheus_client: reconcile counts, errors and time per cluster,
the process's own figures, and each reconciled cluster's Slurm state (slurm.py, read from
slurmrestd at scrape time).

Served over TLS to scrapers whose token RBAC allows (see access.py), on every interface; or,
with no gate, as plain HTTP on loopback only (`kubectl port-forward` still reaches it). The library's
WSGI app writes the exposition; a thin WSGI layer in front of it checks the token.
"""
from __future__ import annotations

import ssl
import threading
import time
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, ProcessCollector, disable_created_metrics, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler
from wsgiref.simple_server import make_server

from soperator.metrics.slurm import SlurmCollector

disable_created_metrics()  # no *_created series: one sample per counter, as before
REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
SLURM = SlurmCollector()
REGISTRY.register(SLURM)
_LABELS = ("namespace", "cluster")
RECONCILES = Counter("soperator_reconcile", "reconciles of a SlurmCluster", _LABELS, registry=REGISTRY)
ERRORS = Counter("soperator_reconcile_errors", "reconciles that raised", _LABELS, registry=REGISTRY)
SECONDS = Counter("soperator_reconcile_seconds", "time spent reconciling", _LABELS, registry=REGISTRY)
COALESCED = Counter("soperator_reconcile_coalesced", "events whose pass another pass, waiting to start, stood for",
                    _LABELS, registry=REGISTRY)


class KubeCalls:
    """The operator's Kubernetes API calls by verb and kind (Kube.calls), and its reads that a watched
    list answered instead (Kube.cached): what the scale rig counts, on a running operator."""

    def __init__(self, kube):
        self.kube = kube

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        counted, cached_reads = self.kube.counts()
        calls = CounterMetricFamily("soperator_kube_requests", "Kubernetes API calls", labels=("verb", "kind"))
        for (verb, kind), n in sorted(counted.items()):
            calls.add_metric((verb, kind), n)
        cached = CounterMetricFamily("soperator_kube_watched_reads", "reads answered from a watched list",
                                     labels=("kind",))
        for kind, n in sorted(cached_reads.items()):
            cached.add_metric((kind,), n)
        return [calls, cached]


def count_kube_calls(kube) -> None:
    REGISTRY.register(KubeCalls(kube))


@contextmanager
def timed(namespace: str, name: str):
    started = time.monotonic()
    errors = ERRORS.labels(namespace, name)  # the series exists from the first reconcile, at 0
    try:
        yield
    except Exception:
        errors.inc()
        raise
    finally:
        RECONCILES.labels(namespace, name).inc()
        SECONDS.labels(namespace, name).inc(time.monotonic() - started)


def _gated(app, gate):
    """Only /metrics, and only for a token the gate lets through."""
    def wrapped(environ, start_response):
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b""]
        status = 200 if gate is None else gate.status_for(environ.get("HTTP_AUTHORIZATION"))
        if status != 200:
            start_response(f"{status} {_REASONS.get(status, 'Error')}", [("Content-Type", "text/plain")])
            return [b""]
        return app(environ, start_response)
    return wrapped


_REASONS = {401: "Unauthorized", 403: "Forbidden", 429: "Too Many Requests", 503: "Service Unavailable"}


class _MetricsServer(ThreadingWSGIServer):
    context: ssl.SSLContext | None = None

    def finish_request(self, request, client_address) -> None:
        # The TLS handshake runs here, in the request's own thread, so a slow client stalls no one
        # (the library's own server wraps the listening socket: one slow handshake blocks accept).
        request.settimeout(10)
        if self.context is not None:
            request = self.context.wrap_socket(request, server_side=True)
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address) -> None:
        pass  # a client that drops the handshake is not the operator's error


def serve(port: int, gate=None, context: ssl.SSLContext | None = None) -> _MetricsServer | None:
    """Start serving in a daemon thread. `gate` (an access.TokenGate) and `context` go together."""
    if port <= 0:
        return None
    if (gate is None) != (context is None):
        raise ValueError("metrics: a token gate needs TLS, and TLS without a gate would be open to all")
    host = "0.0.0.0" if gate is not None else "127.0.0.1"
    server = make_server(host, port, _gated(make_wsgi_app(REGISTRY), gate), _MetricsServer,
                         handler_class=_SilentHandler)
    server.context = context
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
