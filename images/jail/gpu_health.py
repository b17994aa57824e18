#!/usr/bin/env python3
"""The jail's GPU health check, for spec.healthCheck.active (program /usr/lib/soperator/checks/gpu-health,
usually with gpusOnly): exits 0 when the node's GPUs look usable, else 1 with the reason on its last
line, which the check job turns into the drain reason.

It asks nvidia-smi, as a job step in the jail sees the driver: each GPU answers (one that fell off the
bus makes nvidia-smi fail or drop it), as many as the node set has (SOPERATOR_NODE_GPUS, set by the
operator's check job), no uncorrected volatile ECC error, no retired page or remapped row pending (the
GPU needs a reset), no row remapping failure. With `dcgmi` in the jail it also runs DCGM's quick
diagnostic (`dcgmi diag -r 1`). Standalone: the jail has Python's standard library, nothing more.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

FIELDS = ("index", "pci.bus_id", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending")
# Ampere and later; older drivers refuse the fields, older GPUs answer [N/A].
REMAP_FIELDS = ("index", "remapped_rows.pending", "remapped_rows.failure")
TIMEOUT = 120


def problems(rows: list[list[str]], remap: list[list[str]], expected: int | None) -> list[str]:
    """What is wrong, from nvidia-smi's CSV rows (no header, no units), one reason each."""
    found = []
    if expected is not None and len(rows) != expected:
        found.append(f"{len(rows)} of {expected} GPUs answer")
    for index, bus, ecc, retired in rows:
        if ecc.isdigit() and int(ecc) > 0:
            found.append(f"gpu {index} ({bus}): {ecc} uncorrected ECC errors")
        if retired == "Yes":
            found.append(f"gpu {index} ({bus}): retired pages pending, reset it")
    for index, pending, failure in remap:
        if failure == "Yes":
            found.append(f"gpu {index}: row remapping failed")
        elif pending == "Yes":
            found.append(f"gpu {index}: remapped rows pending, reset it")
    return found


def parse(text: str) -> list[list[str]]:
    return [[field.strip() for field in line.split(",")] for line in text.splitlines() if line.strip()]


def query(fields: tuple[str, ...]) -> subprocess.CompletedProcess:
    return subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=TIMEOUT)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def check() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return ["no NVIDIA driver in the jail: nvidia-smi not found"]
    gpus = query(FIELDS)
    if gpus.returncode != 0:
        return [f"nvidia-smi failed ({gpus.returncode}): {last_line(gpus.stderr + gpus.stdout)}"]
    remap = query(REMAP_FIELDS)
    expected = os.environ.get("SOPERATOR_NODE_GPUS")
    found = problems(parse(gpus.stdout), parse(remap.stdout) if remap.returncode == 0 else [],
                     int(expected) if expected and expected.isdigit() else None)
    if not found and shutil.which("dcgmi"):
        diag = subprocess.run(["dcgmi", "diag", "-r", "1"], capture_output=True, text=True, timeout=TIMEOUT)
        if diag.returncode != 0 or "Fail" in diag.stdout:
            failed = [line for line in diag.stdout.splitlines() if "Fail" in line]
            found.append("dcgmi diag -r 1: " + last_line("\n".join(failed) or diag.stderr or diag.stdout))
    return found


def main() -> int:
    try:
        found = check()
    except (OSError, subprocess.TimeoutExpired) as exc:
        found = [f"gpu check could not run: {exc}"]
    # The last line is the reason the check job reports: every finding on it.
    print("; ".join(found) if found else "gpus healthy")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
