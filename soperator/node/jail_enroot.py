"""`python3 -m soperator_node jail-enroot WORKDIR ARGS…`: `enroot ARGS` in the jail for the image cache
(image_cache.py), as root, able to write WORKDIR and nothing else.

Root, because enroot's import needs it: it turns a layer's whiteouts into overlay ones with mknod and
marks opaque directories with a trusted.* extended attribute, which only CAP_SYS_ADMIN in the node's
own user namespace may set (no user namespace can), and unpacks files for their owners. A user's own
`enroot import` cannot do that at all in the jail (enroot wants file capabilities for it, and the jail
is nosuid, its steps no_new_privs). So the process tree that unpacks an untrusted image is held in:
a mount namespace whose root is the jail (as a job step's), in which every mount but WORKDIR is made
read-only before enroot starts; no_new_privs and the login sessions' seccomp filter (no io_uring,
bpf, keyrings, userfaultfd; no user namespaces). Nothing runs if any step fails."""
from __future__ import annotations

import ctypes
import os
import sys

from .health_check import NotRun, enter
from .layout import PATHS
from .roles import JAIL

FAILED = 126
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 0x20, 0x1000, 0x400, 0x800, 0x200000
KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
              "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}


def _mount(source: str | None, target: str, flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode() if source else None, target.encode(), None, flags, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def mounts() -> list[tuple[str, str]]:
    """(mount point, its per-mount options) of this mount namespace, parents first."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            found.append((fields[4].encode().decode("unicode_escape"), fields[5]))
    return found


def writes_only_to(work: str) -> int:
    """Every mount of this (private) namespace read-only, keeping its other flags, but `work`, which
    becomes a mount of its own first. Returns how many were made read-only."""
    _mount(work, work, MS_BIND)
    done = 0
    for point, options in mounts():
        if point == work or point.startswith(work + "/") or "ro" in options.split(","):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in options.split(","):
            flags |= KEPT_FLAGS.get(option, 0)
        _mount(None, point, flags)
        done += 1
    return done


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].startswith("/"):
        print("usage: jail-enroot WORKDIR ARGS…", file=sys.stderr)
        return 2
    work = os.path.realpath(argv[0])
    try:
        enter(JAIL, PATHS.jail_lib, as_session=True)
        writes_only_to(work)
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        os.chdir(work)
        os.execvpe("enroot", ["enroot", *argv[1:]], env)
    except (NotRun, OSError) as exc:
        print(f"jail-enroot: nothing ran: {exc}", file=sys.stderr, flush=True)
    return FAILED
