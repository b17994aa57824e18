"""Prometheus text metrics (reconcile count, errors, duration per cluster) on /metrics.

Served over TLS to scrapers whose token RBAC allows (see metrics_access), on every interface; or,
with no gate, as plain HTTP on loopback only (`kubectl port-forward` still reaches it).
"""
from __future__ import annotations

import ssl
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_lock = threading.Lock()
_counts: dict[tuple[str, str], list[float]] = {}  # (namespace, name) -> [count, errors, seconds]


@contextmanager
def timed(namespace: str, name: str):
    started = time.monotonic()
    failed = False
    try:
        yield
    except Exception:
        failed = True
        raise
    finally:
        with _lock:
            entry = _counts.setdefault((namespace, name), [0, 0, 0.0])
            entry[0] += 1
            entry[1] += failed
            entry[2] += time.monotonic() - started


def render() -> str:
    lines = ["# TYPE soperator_reconcile_total counter", "# TYPE soperator_reconcile_errors_total counter",
             "# TYPE soperator_reconcile_seconds_total counter"]
    with _lock:
        for (ns, name), (count, errors, seconds) in sorted(_counts.items()):
            labels = f'namespace="{ns}",cluster="{name}"'
            lines += [f"soperator_reconcile_total{{{labels}}} {int(count)}",
                      f"soperator_reconcile_errors_total{{{labels}}} {int(errors)}",
                      f"soperator_reconcile_seconds_total{{{labels}}} {seconds:.6f}"]
    return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    server: _MetricsServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path != "/metrics":
            self.send_error(404)
            return
        if self.server.gate is not None:
            status = self.server.gate.status_for(self.headers.get("Authorization"))
            if status != 200:
                self.send_error(status)
                return
        body = render().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class _MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, gate, context: ssl.SSLContext | None):
        super().__init__(address, _Handler)
        self.gate, self.context = gate, context

    def finish_request(self, request, client_address) -> None:
        # The TLS handshake runs here, in the request's own thread, so a slow client stalls no one.
        request.settimeout(10)
        if self.context is not None:
            request = self.context.wrap_socket(request, server_side=True)
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address) -> None:
        pass  # a client that drops the handshake is not the operator's error


def serve(port: int, gate=None, context: ssl.SSLContext | None = None) -> _MetricsServer | None:
    """Start serving in a daemon thread. `gate` (a metrics_access.TokenGate) and `context` go together."""
    if port <= 0:
        return None
    if (gate is None) != (context is None):
        raise ValueError("metrics: a token gate needs TLS, and TLS without a gate would be open to all")
    host = "0.0.0.0" if gate is not None else "127.0.0.1"
    server = _MetricsServer((host, port), gate, context)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
