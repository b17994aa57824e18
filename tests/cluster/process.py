"""A long-running component of the local cluster: started here, stopped by PID, its log kept.

The PID goes to a file beside the log, so a later invocation (`examples/quickstart.py down`) stops
exactly the process this one started: it checks that the PID still runs the same program before it
signals, so a recycled PID is never hit.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def pidfile(self) -> Path:
        return self.log.with_suffix(".pid")

    def start(self) -> None:
        with open(self.log, "ab") as fh:
            # Its own session: Ctrl-C in the terminal that ran `up` does not reach it.
            self.proc = subprocess.Popen(self.argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self.pidfile.write_text(str(self.proc.pid))

    def pid(self) -> int | None:
        if self.proc is not None:
            return self.proc.pid if self.proc.poll() is None else None
        try:
            pid = int(self.pidfile.read_text())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            return None
        # By name, not path: a component whose binary moved (Debian's etcd, then one built here) is still
        # found running, and stopped, by the work directory's `down`.
        return pid if Path(cmdline).name == Path(self.argv[0]).name else None

    def alive(self) -> bool:
        return self.pid() is not None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def stop(self, grace: float = 10) -> None:
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            if not self._wait_gone(pid, grace):
                os.kill(pid, signal.SIGKILL)
                self._wait_gone(pid, grace)
        self.pidfile.unlink(missing_ok=True)

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _gone(pid):
                return True
            time.sleep(0.1)
        return False

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie waiting for a parent that is not us."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_for(comp: Component, ready, deadline: float, error: type[Exception]) -> None:
    """Poll `ready()` until it holds; fail at once, with the component's log, if it exits."""
    while time.monotonic() < deadline:
        if not comp.alive():
            raise error(f"{comp.name} exited with code {comp.returncode} during start:\n{comp.tail()}")
        if ready():
            return
        time.sleep(0.2)
    raise error(f"{comp.name} not ready in time:\n{comp.tail()}")
