"""The controller applies a changed Slurm configuration with no pod replaced.

The kubelet swaps a ConfigMap's files in place (an atomic symlink flip). This notices, by a content
hash every few seconds, and runs `scontrol reconfigure`: slurmctld re-execs itself on the new files
and, configless, every slurmd and sackd fetches them. Running jobs carry on.

Once after each start of the controller, too: configless nodes get files only at their own start and
at a reconfigure, so a slurmctld that started on files changed meanwhile (its pod replaced, or its
re-exec on them failed) would leave them on the old ones (found on the real node: a login node
without the accounting lines, its sacct "accounting storage is disabled").
"""
from __future__ import annotations

import hashlib
import os
from typing import Callable

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
    a thread: the loop reaps every child and would take scontrol's exit status from under a thread).
    `before` runs ahead of each reconfigure (the ClusterID step)."""

    def __init__(self, directory: str, before: Callable[[], object] = lambda: None):
        self.directory = directory
        self.before = before
        self.applied: str | None = None  # nothing pushed yet by this start

    def __call__(self) -> None:
        current = config_digest(self.directory)
        if current == self.applied:
            return
        if self.applied is None and scontrol("ping", timeout=30).returncode != 0:
            return  # slurmctld not up yet: its first push waits for it
        self.before()
        proc = scontrol("reconfigure", timeout=120)
        if proc.returncode == 0:
            log(f"Slurm configuration {'pushed' if self.applied is None else 'changed'}: reconfigured ({current[:12]})")
            self.applied = current
        else:  # slurmctld busy or restarting: the next look tries again
            log(f"scontrol reconfigure failed: {proc.stderr.strip() or proc.returncode}")
