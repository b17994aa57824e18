"""`python3 -m soperator_node jail-enroot WORKDIR ARGS…`: `enroot ARGS` in the jail for the image cache
(image_cache.py), as root, able to write WORKDIR and nothing else.

Root, because enroot's import needs it: it turns a layer's whiteouts into overlay ones with mknod and
marks opaque directories with a trusted.* extended attribute, which only CAP_SYS_ADMIN in the node's
own user namespace may set (no user namespace can), and unpacks files for their owners. A user's own
`enroot import` cannot do that at all in the jail (enroot wants file capabilities for it, and the jail
is nosuid, its steps no_new_privs). So the process tree that unpacks an untrusted image is held in:
- a mount namespace whose root is the jail (as a job step's), every mount read-only but WORKDIR;
- a PID namespace of its own with its own /proc: it sees no other process (no /proc/<pid>/root into
  the worker's container), and all of it dies with its first process;
- a bounding set of what unpacking needs (CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, MKNOD,
  SYS_ADMIN);
- no_new_privs, the login sessions' seccomp filter (no io_uring, bpf, keyrings, userfaultfd, user
  namespaces) and the imports' own (soperator_restrict_import: a mount may only make a new file system,
  never remount, bind or move one; no umount, chroot, pivot_root or setns).
Nothing runs if any step fails."""
from __future__ import annotations

import ctypes
import os
import signal
import sys

from .health_check import NotRun, enter
from .layout import PATHS
from .mounts import Mount, parse_mountinfo
from .roles import JAIL

FAILED = 126
CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG, PR_CAPBSET_READ, PR_CAPBSET_DROP = 1, 23, 24
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 0x20, 0x1000, 0x400, 0x800, 0x200000
KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
              "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
# CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, SYS_ADMIN, MKNOD.
KEPT_CAPABILITIES = {0, 1, 2, 3, 4, 21, 27}

libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, flags: int, fstype: str | None = None) -> None:
    _check(libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                      flags, None), f"mount {target}")


def mounts() -> list[Mount]:
    """This mount namespace's mounts, parents first."""
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return parse_mountinfo(fh.read())


def writes_only_to(work: str, fresh_proc: bool = False) -> int:
    """Every mount of this (private) namespace read-only, keeping its other flags, but `work`, which
    becomes a mount of its own first, writable. `fresh_proc`: a new procfs was just mounted over /proc,
    so the mounts listed below /proc (the old one's masks) are out of reach, and left alone. Returns
    how many were made read-only."""
    _mount(work, work, MS_BIND)
    done = 0
    for mount in mounts():
        point = mount.point
        if fresh_proc and point.startswith("/proc/"):
            continue
        flags = MS_REMOUNT | MS_BIND
        for option in mount.options:
            flags |= KEPT_FLAGS.get(option, 0)
        if point == work:  # a bind of a read-only mount starts read-only
            _mount(None, point, flags)
        elif not point.startswith(work + "/") and not mount.read_only:
            _mount(None, point, flags | MS_RDONLY)
            done += 1
    return done


def keep_only(capabilities: set[int]) -> None:
    """The bounding set cut to `capabilities`: what the next exec (enroot, root's) can have."""
    cap = 0
    while libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0:
        if cap not in capabilities:
            _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
        cap += 1


def _confined(work: str, argv: list[str], lib: ctypes.CDLL) -> None:
    """In the PID namespace's first process: never returns."""
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    _mount("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "proc")
    writes_only_to(work, fresh_proc=True)
    keep_only(KEPT_CAPABILITIES)
    err = ctypes.create_string_buffer(512)
    if lib.soperator_restrict_import(err, len(err)) != 0:
        raise NotRun(f"cannot confine it: {err.value.decode(errors='replace')}")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    os.chdir(work)
    os.execvpe("enroot", ["enroot", *argv], env)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].startswith("/"):
        print("usage: jail-enroot WORKDIR ARGS…", file=sys.stderr)
        return 2
    work = os.path.realpath(argv[0])
    try:
        lib = ctypes.CDLL(PATHS.jail_lib)  # the node's, loaded before the jail hides it
        enter(JAIL, PATHS.jail_lib, as_session=True)
        _check(libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
    except (NotRun, OSError) as exc:
        print(f"jail-enroot: nothing ran: {exc}", file=sys.stderr, flush=True)
        return FAILED
    pid = os.fork()
    if pid == 0:
        try:
            _confined(work, argv[1:], lib)
        except (NotRun, OSError) as exc:
            print(f"jail-enroot: nothing ran: {exc}", file=sys.stderr, flush=True)
        os._exit(FAILED)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
