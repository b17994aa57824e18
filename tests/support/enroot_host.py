"""`enroot import podman://IMAGE` on this host, as an admin with podman makes a .sqsh for a cluster.

enroot comes out of our own node image (the build the jail gets), run from a temporary directory:
its script takes its library and config paths from the environment, and importing from podman needs
none of its compiled parts (podman, jq, tar and mksquashfs do the work; .ci/setup installs the last two).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

from images.build import ensure_base, image_ref
from images.podman import podman, podman_env, store_lock

TREE = "/opt/soperator/enroot"  # where the node image keeps the enroot build (images/common/Containerfile)


def bookworm_image(workdir: Path) -> str:
    """A Debian 12 image (the jail is 13, so a step tells them apart by /etc/os-release), with the
    CMD an image from a registry has and `podman create` needs."""
    ref = "localhost/soperator/test-bookworm:12"
    (workdir / "Containerfile").write_text(f"FROM {ensure_base('bookworm')}\nCMD [\"/bin/bash\"]\n")
    with store_lock():  # no prune in another test process meets the build
        podman("build", "-q", "-t", ref, "-f", str(workdir / "Containerfile"), str(workdir))
    return ref


def extract_enroot(workdir: Path) -> Path:
    name = f"soperator-enroot-{uuid.uuid4().hex[:8]}"
    podman("create", "--name", name, image_ref("node"))
    try:
        podman("cp", f"{name}:{TREE}", str(workdir / "enroot"))
    finally:
        podman("rm", "-f", name, check=False)
    return workdir / "enroot"


def import_podman_image(image: str, target: Path, workdir: Path) -> subprocess.CompletedProcess:
    """Runs `enroot import -o target podman://image`; returns the finished process (checked)."""
    tree = extract_enroot(workdir)
    state = workdir / "enroot-state"
    # enroot 4.1.2 removes its extraction container with `docker rm` whatever the engine: without a
    # `docker` the container stays and the import exits 1. podman under that name, as Debian's
    # podman-docker package installs it.
    (workdir / "bin").mkdir(exist_ok=True)
    (workdir / "bin" / "docker").symlink_to(shutil.which("podman"))
    env = {**podman_env(), "PATH": f"{tree}/usr/bin:{workdir}/bin:{os.environ['PATH']}",
           "ENROOT_LIBRARY_PATH": f"{tree}/usr/lib/enroot", "ENROOT_SYSCONF_PATH": f"{tree}/etc/enroot",
           "ENROOT_CACHE_PATH": str(state / "cache"), "ENROOT_DATA_PATH": str(state / "data"),
           "ENROOT_RUNTIME_PATH": str(state / "run"), "ENROOT_TEMP_PATH": str(workdir),
           "ENROOT_CONFIG_PATH": str(state / "config"), "ENROOT_MAX_PROCESSORS": "2"}
    return subprocess.run(["bash", f"{tree}/usr/bin/enroot", "import", "-o", str(target), f"podman://{image}"],
                          env=env, capture_output=True, text=True, timeout=600, check=True)
