"""A tiny process supervisor for node containers: start daemons, forward SIGTERM, die with any of them,
and reap every orphan the container's processes leave behind."""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time


PR_SET_CHILD_SUBREAPER = 36


class Supervisor:
    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        # Orphans come to us (as PID 1 they would anyway): slurmstepd daemonizes for every job step,
        # and login sessions leave background children. Unreaped, each stays a zombie that counts
        # against its user's process limit.
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

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

    def stop(self) -> None:
        """SIGTERM every daemon and wait for them (a one-shot role's helpers, a failed start)."""
        self._stop(signal.SIGTERM, None)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def reap(self) -> None:
        """Collect every child that has exited: our daemons (their exit code is kept for Popen) and orphans."""
        daemons = {proc.pid: proc for proc in self.procs.values()}
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in daemons:
                daemons[pid].returncode = os.waitstatus_to_exitcode(status)

    def wait(self) -> int:
        """Block until a daemon exits (then stop the rest) or SIGTERM arrives; return the exit code."""
        while True:
            self.reap()
            for name, proc in self.procs.items():
                code = proc.returncode
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
