"""virtiofsd, the host's side of the VM node's virtio-fs share of the cluster's volumes, built once
from crates.io and cached.

virtio-fs, not 9p, because a user-namespaced pod (hostUsers: false) mounts its volumes idmapped, and
9p cannot be: "failed to set MOUNT_ATTR_IDMAP on …/slurm-hpc-jail: invalid argument" (the VM's 6.12
kernel, measured). FUSE file systems can be since Linux 6.12 when the daemon offers FUSE_ALLOW_IDMAP,
which virtiofsd does from 1.13; Debian ships 1.13 only in trixie, built for a newer glibc than the
host's, so it is built here (`cargo install`, about a minute on 2 cores; libseccomp and libcap-ng
headers from .ci/setup).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.cluster.build import CACHE, BuildError

VERSION = "1.13.3"
ROOT = CACHE / f"virtiofsd-{VERSION}"
BINARY = ROOT / "bin" / "virtiofsd"


def cargo_binary() -> str:
    rustup = Path.home() / ".cargo" / "bin" / "cargo"
    found = shutil.which("cargo") or (str(rustup) if os.access(rustup, os.X_OK) else None)
    if not found:
        raise BuildError("cargo not found (on PATH or ~/.cargo/bin) to build virtiofsd for the VM node")
    return found


def ensure_virtiofsd(root: Path = ROOT) -> Path:
    binary = root / "bin" / "virtiofsd"
    if binary.exists():
        return binary
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    proc = subprocess.run([cargo_binary(), "install", "virtiofsd", "--version", f"={VERSION}", "--locked",
                           "--root", str(partial)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise BuildError(f"building virtiofsd {VERSION} failed (cargo install):\n{tail}")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    for old in CACHE.glob("virtiofsd-*"):
        if old != root and not old.name.endswith(".partial"):
            shutil.rmtree(old, ignore_errors=True)
    return binary


if __name__ == "__main__":
    print(f"virtiofsd ready: {ensure_virtiofsd()}")
