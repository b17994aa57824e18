"""Names a node's daemons need before they start. A pod's DNS record appears a moment after the pod
starts, and the controller's may not exist yet when a whole cluster starts at once: a daemon started
before its names resolve logs a failed lookup and carries on half-configured (slurmd: "Unable to
resolve" the conf server). So the entrypoint waits, bounded, saying what it waits for."""
from __future__ import annotations

import socket
import time
from typing import Callable

from .supervise import log


def lookup(name: str) -> str:
    """'' once `name` resolves to an IPv4 address (Slurm asks for IPv4 only), else why not."""
    try:
        socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        return str(exc)
    return ""


def wait_for_names(names: list[str], timeout: float, stop: Callable[[], bool] = lambda: False,
                   poll: float = 0.5) -> None:
    """Return once every name resolves; a log line for each name that does not at first, and again
    when it does; RuntimeError naming what did not resolve after `timeout` seconds, or once the
    container is told to stop."""
    deadline = time.monotonic() + timeout
    waiting: dict[str, str] = {}
    while True:
        failing = {name: why for name in dict.fromkeys(names) if (why := lookup(name))}
        for name, why in failing.items():
            if waiting.get(name) != why:
                log(f"waiting for {name} to resolve: {why}")
        for name in waiting.keys() - failing.keys():
            log(f"{name} resolves")
        waiting = failing
        if not failing:
            return
        if time.monotonic() > deadline or stop():
            waited = "stopped while waiting" if stop() else f"names did not resolve within {timeout:.0f} s"
            raise RuntimeError(f"{waited}: " + "; ".join(f"{name} ({why})" for name, why in failing.items()))
        time.sleep(poll)
