"""The node entrypoints' one way to run scontrol (as root, a Slurm admin; the munge socket is local)."""
from __future__ import annotations

import subprocess


def scontrol(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=timeout, env=env)
