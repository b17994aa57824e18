"""podman with a configuration of its own, so builds and tests neither read nor change the host's.

Measured on these machines: crun refuses the hybrid cgroup layout (use runc + cgroupfs), and podman's
default ulimits exceed the VM's hard limits (set lower ones). Networks use netavark, whose aardvark-dns
lets containers resolve each other by name; podman would otherwise pick CNI (with no DNS plugin) on a
machine that has CNI state, so the backend is named, and its network definitions live here too.
"""
from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Callable

CACHE = Path(os.environ.get("SOPERATOR_CACHE", Path.home() / ".cache" / "soperator"))
PODMAN_DIR = CACHE / "podman"

CONTAINERS_CONF = """[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"

[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[network]
network_backend = "netavark"
network_config_dir = "{networks}"
"""


class PodmanError(RuntimeError):
    pass


_LOCK = threading.RLock()
_held: list[int] = []  # the lock file's descriptor while this process holds it


@contextlib.contextmanager
def store_lock():
    """The image store to this holder alone among processes: the test suite runs in several pytest
    workers, and a build, an image prune or a base debootstrap in one must not meet another's (a prune
    removes the untagged steps of a build under way). Re-entrant within a process."""
    with _LOCK:
        if _held:
            yield
            return
        PODMAN_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(PODMAN_DIR / "store.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _held.append(fd)
            yield
        finally:
            _held.clear()
            os.close(fd)  # closing releases the flock


def _settle(path: Path, text: str) -> None:
    """`path` holds `text`, never anything less: another test worker's podman may be reading it right
    now, and a truncated containers.conf sends it to the host's network directory (seen in CI: a network
    just made was "not found"). Unchanged files are not written at all."""
    with contextlib.suppress(FileNotFoundError):
        if path.read_text() == text:
            return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def podman_env() -> dict[str, str]:
    PODMAN_DIR.mkdir(parents=True, exist_ok=True)
    conf = PODMAN_DIR / "containers.conf"
    storage = PODMAN_DIR / "storage.conf"
    _settle(conf, CONTAINERS_CONF.format(networks=PODMAN_DIR / "networks"))
    _settle(storage, f'[storage]\ndriver = "overlay"\ngraphroot = "{PODMAN_DIR}/storage"\n'
                     f'runroot = "{PODMAN_DIR}/run"\n')
    return {**os.environ, "CONTAINERS_CONF": str(conf), "CONTAINERS_STORAGE_CONF": str(storage)}


def _binary() -> str:
    binary = shutil.which("podman")
    if not binary:
        raise PodmanError("podman not found: install podman, buildah and runc (see .ci/run)")
    return binary


def podman_streamed(*args: str, on_line: Callable[[str], None], timeout: float = 900) -> None:
    """podman with each output line handed to `on_line` as it comes (a build's steps, for a person
    waiting); the last lines go into the error when it fails or outlives `timeout`."""
    proc = subprocess.Popen([_binary(), *args], env=podman_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    tail: collections.deque[str] = collections.deque(maxlen=60)
    try:
        for line in proc.stdout:
            tail.append(line)
            on_line(line.rstrip("\n"))
        code = proc.wait()
    finally:
        timer.cancel()
    if code != 0:
        raise PodmanError(f"podman {' '.join(args[:3])}... failed ({code}; killed after {timeout:.0f} s if negative):\n"
                          + "".join(tail)[-3000:])


def podman(*args: str, check: bool = True, timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([_binary(), *args], env=podman_env(), capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise PodmanError(f"podman {' '.join(args[:3])}... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc
