"""Prometheus text metrics (reconcile count, errors, duration per cluster) on /metrics."""
from __future__ import annotations

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
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path != "/metrics":
            self.send_error(404)
            return
        body = render().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def serve(port: int) -> None:
    if port <= 0:
        return
    server = ThreadingHTTPServer(("0.0.0.0", port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
