"""Test helpers that run real Slurm daemons in namespaces owned by the test."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SANDBOX = Path(__file__).with_name("slurm_sandbox.py")


def require_slurm() -> None:
    missing = [b for b in ("slurmctld", "munged", "scontrol", "sinfo", "unshare") if not shutil.which(b)]
    if missing:
        pytest.fail(f"Slurm test binaries missing: {', '.join(missing)} (install slurm-wlm and munge; "
                    "see .ci/run)", pytrace=False)
    if os.geteuid() != 0:
        pytest.skip("needs root for namespaces")


def write_configs(files: dict[str, str], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def run_controller(files: dict[str, str], hostname: str, munge_key: bytes, work: Path) -> dict:
    """Start slurmctld with exactly these config files; return what it reported (see slurm_sandbox)."""
    require_slurm()
    config = write_configs(files, work / "etc-slurm")
    key = work / "munge.key.src"
    key.write_bytes(munge_key)
    os.chmod(work, 0o755)
    cmd = ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "--mount", "--net", "--propagation",
           "private", sys.executable, str(SANDBOX), str(work), hostname, str(config), str(key)]
    # The sandbox is PID 1 of its namespace: when it exits, every daemon it started is killed.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"sandbox failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(proc.stdout)
