"""A TCP port on loopback that relays to a unix socket of a test's Slurm sandbox (slurmrestd's, or the
relay to slurmctld's own HTTP server): the operator's clients speak HTTP over TCP, as they do in a
cluster."""
from __future__ import annotations

import selectors
import socket
import socketserver
import threading


class _Relay(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.server.unix_path)
        except OSError:
            return  # the caller sees the connection close: slurmrestd is not there
        with upstream, selectors.DefaultSelector() as sel:
            sel.register(self.request, selectors.EVENT_READ, upstream)
            sel.register(upstream, selectors.EVENT_READ, self.request)
            while True:
                for key, _ in sel.select():
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    key.data.sendall(data)


class RestForwarder(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self, unix_path: str, address: tuple[str, int] = ("127.0.0.1", 0)):
        super().__init__(address, _Relay)
        self.unix_path = unix_path
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()
