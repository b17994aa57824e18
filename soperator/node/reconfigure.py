"""The controller applies a changed Slurm configuration with no pod replaced.

The kubelet swaps a ConfigMap's files in place (an atomic symlink flip). This notices, by a content
hash every few seconds, and runs `scontrol reconfigure`: slurmctld re-execs itself on the new files
and, configless, every slurmd and sackd fetches them. Running jobs carry on.

The digest of the files last pushed is kept on the controller's spool volume. Configless nodes get
files only at their own start and at a reconfigure, so a slurmctld that starts on files changed
since the last push (its pod replaced meanwhile, or its re-exec on them failed) pushes them once it
answers (found on the real node: a login node without the accounting lines, its sacct "accounting
storage is disabled"). A start on the files already pushed does nothing: a reconfigure at every
start, while jobs launch, got a batch job requeued (e2e).
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

    def __init__(self, directory: str, pushed_file: str, before: Callable[[], object] = lambda: None):
        self.directory = directory
        self.pushed_file = pushed_file
        self.before = before
        try:
            with open(pushed_file) as fh:
                self.applied = fh.read().strip()
        except FileNotFoundError:  # a first start: every node fetches these files from it
            self._pushed(config_digest(directory))
        self.started = True

    def _pushed(self, digest: str) -> None:
        self.applied = digest
        tmp = f"{self.pushed_file}.new"
        with open(tmp, "w") as fh:
            fh.write(digest + "\n")
        os.replace(tmp, self.pushed_file)

    def __call__(self) -> None:
        current = config_digest(self.directory)
        if current == self.applied:
            self.started = False
            return
        if self.started and scontrol("ping", timeout=30).returncode != 0:
            return  # slurmctld not up yet: the push waits for it
        self.before()
        proc = scontrol("reconfigure", timeout=120)
        if proc.returncode == 0:
            self._pushed(current)
            self.started = False
            log(f"Slurm configuration changed: reconfigured ({current[:12]})")
        else:  # slurmctld busy or restarting: the next look tries again
            log(f"scontrol reconfigure failed: {proc.stderr.strip() or proc.returncode}")
