"""A dynamic node's place in Slurm's topology at registration. The operator writes the place on the
pod once the scheduler has bound it (layout.PLACE_ANNOTATION, from the Kubernetes node's labels), and
the kubelet shows it in a downward API file. Registering with it (`slurmd --conf "... Topology=…"`)
means no job is scheduled on the node in a place that is not its own; the wait is bounded, and a node
that registers without a place is placed through slurmrestd by the operator's next pass."""
from __future__ import annotations

import re
import time
from typing import Callable

from .supervise import log

# Slurm's `topology:unit[:unit…]` with the operator's names: label values, `_root`, `_unplaced`.
_PLACE = re.compile(r"[A-Za-z0-9._-]+(:[A-Za-z0-9._-]+)+")


def read_place(path: str) -> str:
    """The place the file holds; '' while it has none (an empty file, the annotation not set yet)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except FileNotFoundError:
        return ""


def wait_for_place(path: str, timeout: float, stop: Callable[[], bool] = lambda: False,
                   poll: float = 0.5) -> str:
    """The place once the file holds one; '' after `timeout` seconds or once told to stop, logged."""
    started = time.monotonic()
    deadline = started + timeout
    logged = False
    while True:
        place = read_place(path)
        if place and _PLACE.fullmatch(place):
            log(f"topology: registering at {place}" + (f" (waited {time.monotonic() - started:.1f} s)" if logged else ""))
            return place
        if place:  # never passed to slurmd: a malformed --conf stops it at once
            log(f"topology: ignored a place that is not Slurm's topology:unit form: {place!r}")
            return ""
        if time.monotonic() > deadline or stop():
            log(f"topology: no place within {timeout:.0f} s; registering unplaced, the operator places it")
            return ""
        if not logged:
            log("topology: waiting for the operator to write this pod's place")
            logged = True
        time.sleep(poll)


def registration_conf(conf: str, place: str) -> str:
    """slurmd's --conf for a dynamic node, at its place when it has one."""
    return f"{conf} Topology={place}" if place else conf
