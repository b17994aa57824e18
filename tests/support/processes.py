"""Stopping a process a test started, by its PID: SIGTERM, a grace period, then SIGKILL."""
from __future__ import annotations

import signal
import subprocess


def stop(proc: subprocess.Popen | None, grace: float = 20) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
