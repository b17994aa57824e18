"""Polling with a deadline, for tests that wait on real processes and controllers."""
from __future__ import annotations

import time


def until(predicate, timeout: float, what: str, interval: float = 0.5):
    """The first truthy value of `predicate()`; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
