"""A tiny process supervisor for node containers: start daemons, forward SIGTERM, die with any of them."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


class Supervisor:
    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)

    def start(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        log(f"starting {name}: {' '.join(argv)}")
        proc = subprocess.Popen(argv, **kw)
        self.procs[name] = proc
        return proc

    def _stop(self, signum, _frame) -> None:
        self.stopping = True
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        """Block until a daemon exits (then stop the rest) or SIGTERM arrives; return the exit code."""
        while True:
            for name, proc in self.procs.items():
                code = proc.poll()
                if code is not None:
                    if not self.stopping:
                        log(f"{name} exited with {code}; stopping the node")
                    self._stop(signal.SIGTERM, None)
                    for other in self.procs.values():
                        try:
                            other.wait(timeout=30)
                        except subprocess.TimeoutExpired:
                            other.kill()
                    return 0 if self.stopping and code in (0, -signal.SIGTERM) else (code or 1)
            time.sleep(0.5)


def log(message: str) -> None:
    print(f"soperator-node: {message}", file=sys.stderr, flush=True)


def wait_for_path(path: str, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False
