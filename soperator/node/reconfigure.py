"""The controller applies a changed Slurm configuration with no pod replaced.

The kubelet swaps a ConfigMap's files in place (an atomic symlink flip). This notices, by a content
hash every few seconds, and runs `scontrol reconfigure`: slurmctld re-execs itself on the new files
and, configless, every slurmd and sackd fetches them. Running jobs carry on.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import threading

from .supervise import log


def config_digest(directory: str) -> str:
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not name.startswith("..") and os.path.isfile(path):
            with open(path, "rb") as fh:
                digest.update(name.encode() + b"\0" + fh.read() + b"\0")
    return digest.hexdigest()


def watch(directory: str, stop: threading.Event, interval: float = 5.0) -> None:
    applied = config_digest(directory)
    while not stop.wait(interval):
        current = config_digest(directory)
        if current == applied:
            continue
        proc = subprocess.run(["scontrol", "reconfigure"], capture_output=True, text=True, timeout=120)
        if proc.returncode == 0:
            applied = current
            log(f"Slurm configuration changed: reconfigured ({current[:12]})")
        else:  # slurmctld busy or restarting: the next round tries again
            log(f"scontrol reconfigure failed: {proc.stderr.strip() or proc.returncode}")


def start_watcher(directory: str) -> threading.Event:
    """Watch in a daemon thread; set the returned event to stop."""
    stop = threading.Event()
    threading.Thread(target=watch, args=(directory, stop), daemon=True, name="reconfigure").start()
    return stop
