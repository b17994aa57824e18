"""The controller applies a changed Slurm configuration with no pod replaced.

The kubelet swaps a ConfigMap's files in place (an atomic symlink flip). This notices, by a content
hash every few seconds, and runs `scontrol reconfigure`: slurmctld re-execs itself on the new files
and, configless, every slurmd and sackd fetches them. Running jobs carry on.
"""
from __future__ import annotations

import hashlib
import os

from .scontrol import scontrol
from .supervise import log


def config_digest(directory: str) -> str:
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not name.startswith("..") and os.path.isfile(path):
            with open(path, "rb") as fh:
                digest.update(name.encode() + b"\0" + fh.read() + b"\0")
    return digest.hexdigest()


class ConfigWatch:
    """One look at the files, for the supervisor's loop to call every few seconds (from the loop, not
    a thread: the loop reaps every child and would take scontrol's exit status from under a thread)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.applied = config_digest(directory)

    def __call__(self) -> None:
        current = config_digest(self.directory)
        if current == self.applied:
            return
        proc = scontrol("reconfigure", timeout=120)
        if proc.returncode == 0:
            self.applied = current
            log(f"Slurm configuration changed: reconfigured ({current[:12]})")
        else:  # slurmctld busy or restarting: the next look tries again
            log(f"scontrol reconfigure failed: {proc.stderr.strip() or proc.returncode}")
