"""Login nodes: one cgroup per ssh user, with a memory and a CPU limit (spec.login.sessionLimits).

All of a user's sessions share `users/<uid>` under the login container's own cgroups, so one user's
compile or memory hog meets the limit and the kernel's OOM killer there, while everyone else's
sessions, and the node's daemons, run on.

How a session gets there: sshd's per-connection process, root's, checks the account through PAM once the
key is accepted, and later forks the process that becomes the user. The PAM stack (pam_sshd.j2) runs
`main` through pam_exec in that account step, which moves that parent process into the user's cgroup;
every process of the connection's sessions descends from it. The account step, because its failure
refuses the login: OpenSSH lets a session whose PAM session step failed go on (auth-pam.c
do_pam_session: only forwarding is restricted), which would leave it unconfined. Root is left out: an
admin can always log in, whatever the users do.

The login entrypoint readies the cgroups once (`ready`), after the jail's bind of /sys: the container's
own cgroup mounts become writable for sshd's PAM step, while the jail's copies stay read-only, so no
session, root's included, can move itself out or raise its limit.
- cgroup v2 (a cgroup namespace rooted at the container's cgroup): the container's processes move to
  the leaf `system`, so that the root may hand memory and cpu down to `users`.
- cgroup v1: `users` in the memory and cpu hierarchies. A v1 child may not have more CPU quota than
  its parent: the quota is capped at the pod's.
In a user namespace (spec.login.hostUsers: false) the container's cgroups are the node's root's until
the operator chart's cgroup delegate hands them to the pod's root: `ready` waits for that. On either
kernel the move is then allowed: the process moved is root's, as the writer is (v1 refuses a user-namespaced
root only another user's task, which is why user-namespaced workers refuse v1).
"""
from __future__ import annotations

import argparse
import os
import pwd

from .cgroups import (CGROUP_ROOT, CgroupError, await_delegation, check_own_v2, in_user_namespace, make_writable,
                      mounted_at, on_this_kernel, own_v1_hierarchies, read, v1_hierarchies)
from .layout import PATHS
from .mounts import Mount, parse_mountinfo

USERS = "users"
SYSTEM = "system"
CONTROLLERS = ("memory", "cpu")
CPU_PERIOD_US = 100_000
# The kernel's smallest CFS quota.
MIN_CPU_QUOTA_US = 1_000
PURPOSE = "login sessions' limits"


def cpu_quota_us(cpu_milli: int, parent_quota_us: int = -1, parent_period_us: int = CPU_PERIOD_US) -> int:
    """The CFS quota per CPU_PERIOD_US for `cpu_milli` thousandths of a CPU; on v1 no more than the
    parent's (-1: none), which the kernel refuses to exceed."""
    quota = max(MIN_CPU_QUOTA_US, cpu_milli * CPU_PERIOD_US // 1000)
    if parent_quota_us > 0:
        quota = min(quota, parent_quota_us * CPU_PERIOD_US // parent_period_us)
    return quota


def v2_limits(memory: int, cpu_milli: int, has_swap: bool) -> list[tuple[str, str]]:
    """(file, value) pairs for a user's cgroup v2 directory; 0 leaves that limit out. No swap for a
    limited session: a hog should meet the OOM killer, not slow the node down swapping."""
    writes = []
    if memory:
        writes.append(("memory.max", str(memory)))
        if has_swap:
            writes.append(("memory.swap.max", "0"))
    if cpu_milli:
        writes.append(("cpu.max", f"{cpu_quota_us(cpu_milli)} {CPU_PERIOD_US}"))
    return writes


def v1_memory_limits(memory: int, has_memsw: bool) -> list[tuple[str, str]]:
    """memsw (memory + swap) may not be set below the memory limit: the memory limit is written first."""
    if not memory:
        return []
    return [("memory.limit_in_bytes", str(memory))] + ([("memory.memsw.limit_in_bytes", str(memory))]
                                                       if has_memsw else [])


def v1_cpu_limits(cpu_milli: int, parent_quota_us: int, parent_period_us: int) -> list[tuple[str, str]]:
    if not cpu_milli:
        return []
    return [("cpu.cfs_period_us", str(CPU_PERIOD_US)),
            ("cpu.cfs_quota_us", str(cpu_quota_us(cpu_milli, parent_quota_us, parent_period_us)))]


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


def _mounts() -> tuple[list[Mount], Mount | None]:
    entries = parse_mountinfo(read("/proc/self/mountinfo"))
    return entries, mounted_at(entries, CGROUP_ROOT)


def _move_all(source: str, target: str) -> int:
    """Every process of `source` into `target`; a process that exits meanwhile is no longer there."""
    moved = 0
    for _ in range(10):
        pids = read(f"{source}/cgroup.procs").split()
        if not pids:
            return moved
        for pid in pids:
            try:
                _write(f"{target}/cgroup.procs", pid)
                moved += 1
            except ProcessLookupError:
                pass
    raise CgroupError(f"processes keep appearing in {source}: cannot empty it for {PURPOSE}")


def _ready_v2(node: str, root: Mount, own: dict[str, str], delegated: bool) -> str:
    check_own_v2(node, root, own)
    if delegated:
        await_delegation(node, [CGROUP_ROOT])
    missing = [c for c in CONTROLLERS if c not in read(f"{CGROUP_ROOT}/cgroup.controllers").split()]
    if missing:
        raise CgroupError(f"node {node}: the login container's cgroup lacks the controllers {', '.join(missing)} "
                          f"that {PURPOSE} need")
    make_writable(node, [root], [CGROUP_ROOT], PURPOSE)
    return hand_down_v2()


def hand_down_v2() -> str:
    """The container's processes into `system`, memory and cpu handed down to `users`."""
    system, users = f"{CGROUP_ROOT}/{SYSTEM}", f"{CGROUP_ROOT}/{USERS}"
    os.makedirs(system, exist_ok=True)
    # A cgroup that hands controllers down holds no process itself (cgroup v2's "no internal processes").
    moved = _move_all(CGROUP_ROOT, system)
    enable = " ".join(f"+{c}" for c in CONTROLLERS)
    _write(f"{CGROUP_ROOT}/cgroup.subtree_control", enable)
    os.makedirs(users, exist_ok=True)
    _write(f"{users}/cgroup.subtree_control", enable)
    return f"cgroup v2: {moved} processes in {system}, each ssh user's sessions in {users}/<uid>"


def _ready_v1(node: str, entries: list[Mount], own: dict[str, str], delegated: bool) -> str:
    hierarchies = own_v1_hierarchies(node, entries, own, CONTROLLERS, PURPOSE)
    points = sorted({hierarchies[c].point for c in CONTROLLERS})
    if delegated:
        await_delegation(node, points)
    make_writable(node, entries, points, PURPOSE)
    for point in points:
        os.makedirs(f"{point}/{USERS}", exist_ok=True)
    return f"cgroup v1: each ssh user's sessions in {USERS}/<uid> of {', '.join(points)}"


def ready(node: str, uid_map: str | None = None) -> str:
    """Make the login container's cgroups take users' sessions (in a user namespace: once they are
    delegated to it); raises CgroupError naming the node and what it lacks. Returns what was done, for
    the log."""
    delegated = in_user_namespace(uid_map if uid_map is not None else read("/proc/self/uid_map"))
    done = on_this_kernel(node, PURPOSE, lambda root, own: _ready_v2(node, root, own, delegated),
                          lambda entries, _, own: _ready_v1(node, entries, own, delegated))
    return done + (" (delegated to this user namespace's root)" if delegated else "")


def _v1_parent_quota(cpu_dir: str) -> tuple[int, int]:
    return int(read(f"{cpu_dir}/cpu.cfs_quota_us")), int(read(f"{cpu_dir}/cpu.cfs_period_us"))


def _user_dir(parent: str, uid: int) -> str:
    path = f"{parent}/{USERS}/{uid}"
    os.makedirs(path, exist_ok=True)
    return path


def confine(pid: int, uid: int, memory: int, cpu_milli: int) -> list[str]:
    """Move `pid` (sshd's per-connection process) into `uid`'s cgroup, limits set; returns the cgroups."""
    entries, root = _mounts()
    if root is not None and root.fstype == "cgroup2":
        path = _user_dir(CGROUP_ROOT, uid)
        for name, value in v2_limits(memory, cpu_milli, os.path.exists(f"{path}/memory.swap.max")):
            _write(f"{path}/{name}", value)
        _write(f"{path}/cgroup.procs", str(pid))
        return [path]
    hierarchies = v1_hierarchies(entries)
    memory_dir = _user_dir(hierarchies["memory"].point, uid)
    cpu_dir = _user_dir(hierarchies["cpu"].point, uid)
    has_memsw = os.path.exists(f"{memory_dir}/memory.memsw.limit_in_bytes")
    for name, value in v1_memory_limits(memory, has_memsw):
        _write(f"{memory_dir}/{name}", value)
    for name, value in v1_cpu_limits(cpu_milli, *_v1_parent_quota(hierarchies["cpu"].point)):
        _write(f"{cpu_dir}/{name}", value)
    for path in (memory_dir, cpu_dir):
        _write(f"{path}/cgroup.procs", str(pid))
    return [memory_dir, cpu_dir]


def _log(message: str) -> None:
    """Into the file the login entrypoint copies to the pod's log: pam_exec gives this program
    /dev/null, and sshd's stderr is out of reach (sshd makes itself undumpable)."""
    try:
        fd = os.open(PATHS.session_limits_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"session-limits: {message}\n")
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """pam_exec's account step: PAM_USER and PAM_TYPE in the environment, the limits as arguments.
    A non-zero exit refuses the login: a user's session never runs unlimited by mistake."""
    parser = argparse.ArgumentParser(prog="session-limits")
    parser.add_argument("--memory", type=int, default=0, help="bytes; 0: none")
    parser.add_argument("--cpu", type=int, default=0, help="thousandths of a CPU; 0: none")
    args = parser.parse_args(argv)
    if os.environ.get("PAM_TYPE") != "account":
        return 0
    user = os.environ.get("PAM_USER", "")
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        _log(f"no such user {user!r}")
        return 1
    if uid == 0:
        return 0
    try:
        confine(os.getppid(), uid, args.memory, args.cpu)
    except (OSError, CgroupError) as exc:
        _log(f"{user}'s login refused: cannot confine it ({exc})")
        return 1
    return 0

