"""A worker's cgroups for Slurm's cgroup plugins, without a privileged pod.

The runtime mounts an unprivileged container's cgroups read-only, each rooted at the container's own
cgroup. Slurm builds its tree under those roots, so the worker makes its own mounts writable (bind
remounts: this container's mount flags only, nothing of the host's) before `/sys` is bound into the
jail: slurmstepd creates a step's cgroups from inside the jail.

- cgroup v2 (a cgroup namespace rooted at the container's cgroup): slurmd's cgroup/v2 plugin
  (IgnoreSystemd=yes) moves the container's processes into `<root>/system`, enables the controllers
  and makes `system.slice/<node>_slurmstepd.scope` with a cgroup per job, step and task.
- cgroup v1 (a tmpfs holding one bind of the container's cgroup per controller): the cgroup/v1 plugin
  makes `<controller>/slurm_<node>/uid_*/job_*/step_*` in freezer, cpuset, memory, devices and cpuacct.
  `CgroupPlugin=autodetect` takes a node for v1 only when `/sys/fs/cgroup/systemd` is a v1 hierarchy,
  which a node without systemd has not: the freezer mount is bound there (Slurm reads only its type).
  The runtime leaves a v1 container in the host's cgroup namespace, where /proc/<pid>/cgroup gives
  host paths that Slurm, joining them to its mount points, cannot find (proctrack's "is this pid in
  the job", pid-to-job lookups): the entrypoint moves itself into a cgroup namespace of its own,
  rooted at the container's cgroups as the mounts are, before it starts any daemon.

The pod's own limits stay where the container cannot raise them: on the parent cgroups (the pod's),
out of sight under v2's namespace, and capping every child under v1's hierarchical accounting.
"""
from __future__ import annotations

import os
import time
from typing import Callable

from .mounts import Mount, MountError, parse_mountinfo, run_mount

CGROUP_ROOT = "/sys/fs/cgroup"
# What ConstrainCores and ConstrainRAMSpace write through on v2 (cpuset.cpus, memory.max).
V2_CONTROLLERS = ("cpuset", "memory")
# The v1 hierarchies Slurm's cgroup/v1 plugin uses (proctrack: freezer; task: cpuset, memory, devices;
# jobacct_gather: cpuacct).
V1_CONTROLLERS = ("freezer", "cpuset", "memory", "devices", "cpuacct")
V1_AUTODETECT = f"{CGROUP_ROOT}/systemd"
# Every v1 controller the kernel may offer: a v1 mount's other super options (rw, xattr, noprefix,
# clone_children, name=…) are not controllers.
KNOWN_V1_CONTROLLERS = frozenset({"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls",
                                  "net_prio", "blkio", "perf_event", "hugetlb", "pids", "rdma", "misc"})


# How long a user-namespaced worker waits for its cgroups to be handed to it (soperator/cgroup_delegate:
# the delegate sees the container once the kubelet reports it running).
DELEGATION_SECONDS = 120.0


class CgroupError(RuntimeError):
    pass


def in_user_namespace(uid_map: str) -> bool:
    """Whether /proc/self/uid_map is a pod's range, not the node's identity map."""
    return uid_map.split() != ["0", "0", "4294967295"]


def await_delegation(node: str, points: list[str], seconds: float = DELEGATION_SECONDS,
                     sleep: Callable[[float], None] = time.sleep) -> None:
    """In a user namespace the container's cgroups belong to the node's root (shown here as the
    overflow id) until they are delegated to this namespace's root: wait for that."""
    deadline = time.monotonic() + seconds
    while True:
        foreign = [p for p in points if os.stat(p).st_uid != 0]
        if not foreign:
            return
        if time.monotonic() >= deadline:
            raise CgroupError(
                f"node {node}: this container runs in a user namespace (hostUsers: false) and its cgroups "
                f"({foreign[0]}) were not delegated to it within {seconds:.0f} s: the node needs the operator "
                "chart's cgroupDelegate DaemonSet, or a runtime that delegates them (the systemd cgroup driver "
                "with containerd's cgroup_writable, on cgroup v2)")
        sleep(1.0)


def own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """/proc/self/cgroup as {controller: path}; v2's single line under the key ''."""
    found = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                found[controller] = parts[2]
    return found


def mounted_at(entries: list[Mount], point: str) -> Mount | None:
    """What is seen at `point`: the last mount there (a mount over a mount hides it)."""
    at = [m for m in entries if m.point == point]
    return at[-1] if at else None


def v1_hierarchies(entries: list[Mount]) -> dict[str, Mount]:
    """Each v1 controller mounted under CGROUP_ROOT, and its mount (cpu,cpuacct share one)."""
    found = {}
    for m in entries:
        if m.fstype == "cgroup" and os.path.dirname(m.point) == CGROUP_ROOT:
            for option in m.super_options:
                if option in KNOWN_V1_CONTROLLERS:
                    found[option] = m
    return found


def missing_controllers(available: str) -> list[str]:
    """Which of the controllers v2's constraints need a cgroup.controllers line lacks."""
    have = set(available.split())
    return [c for c in V2_CONTROLLERS if c not in have]


def read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _run_mount(node: str, what: str, *args: str) -> None:
    try:
        run_mount(*args)
    except MountError as exc:
        raise CgroupError(f"node {node}: cannot make {what} ({exc})") from exc


def check_own_v2(node: str, root: Mount, own: dict[str, str]) -> None:
    """The container must be in a cgroup namespace of its own, rooted where its cgroup2 mount is."""
    if own.get("") != "/" or root.root != "/":
        raise CgroupError(f"node {node}: the container is not in a cgroup namespace of its own (it is in "
                          f"{own.get('', '?')}, its {CGROUP_ROOT} shows {root.root}): Slurm would build on the "
                          "node's cgroups")


def _prepare_v2(node: str, root: Mount, own: dict[str, str], delegated: bool) -> str:
    check_own_v2(node, root, own)
    if delegated:
        await_delegation(node, [CGROUP_ROOT])
    make_writable(node, [root], [CGROUP_ROOT], "Slurm's cgroup plugin")
    probe_child(node, CGROUP_ROOT, "cgroup/v2")
    missing = missing_controllers(read(f"{CGROUP_ROOT}/cgroup.controllers"))
    if missing:
        raise CgroupError(f"node {node}: the container's cgroup lacks the controllers {', '.join(missing)} "
                          "that cgroup/v2's ConstrainCores and ConstrainRAMSpace need")
    nsdelegate = "nsdelegate" in root.super_options
    return (f"cgroup v2: {CGROUP_ROOT} writable for slurmd's cgroup/v2"
            + ("" if nsdelegate else " (the node mounts cgroup2 without nsdelegate: root in this container, "
                                    "not in its jobs, could write the pod's own limits)"))


def probe_child(node: str, parent: str, plugin: str) -> None:
    """A cgroup made and removed under `parent`: what Slurm does next, proven before it starts."""
    probe = f"{parent}/soperator-probe"
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as exc:
        raise CgroupError(f"node {node}: cannot make a cgroup under the container's own {parent} ({exc.strerror}): "
                          f"it is not delegated to the container ({plugin})") from exc


def own_v1_hierarchies(node: str, entries: list[Mount], own: dict[str, str], controllers: tuple[str, ...],
                       user: str = "Slurm's cgroup/v1 plugin") -> dict[str, Mount]:
    """The v1 hierarchies of `controllers`, each rooted at the container's own cgroup."""
    hierarchies = v1_hierarchies(entries)
    missing = [c for c in controllers if c not in hierarchies]
    if missing:
        raise CgroupError(f"node {node}: cgroup v1 without the hierarchies {', '.join(missing)} that {user} needs")
    foreign = [c for c in controllers if hierarchies[c].root != own.get(c)]
    if foreign:
        raise CgroupError(f"node {node}: {CGROUP_ROOT}/{foreign[0]} shows {hierarchies[foreign[0]].root}, not the "
                          f"container's own cgroup {own.get(foreign[0], '?')}: {user} would build on the node's")
    return hierarchies


def make_writable(node: str, entries: list[Mount], points: list[str], user: str) -> None:
    """Bind-remount each of `points` read-write (this container's mounts only)."""
    for point in points:
        if mounted_at(entries, point).read_only:
            _run_mount(node, f"{point} writable for {user}", "-o", "remount,bind,rw", point)


def _prepare_v1(node: str, entries: list[Mount], root: Mount, own: dict[str, str], delegated: bool) -> str:
    if delegated:
        # Measured on the test node: every step of a non-root user failed "Unable to move pid … Permission
        # denied" (slurmstepd moves a task once it has become the job's user).
        raise CgroupError(f"node {node}: this worker runs in a user namespace (hostUsers: false) on cgroup v1, "
                          "where the kernel lets only the node's root move another user's task into a cgroup: "
                          "Slurm's cgroup plugins would start root's jobs only. Run the node set on cgroup v2 "
                          "nodes, or with hostUsers: true, or the cluster without cgroup plugins "
                          "(proctrack/linuxproc, task/affinity)")
    hierarchies = own_v1_hierarchies(node, entries, own, V1_CONTROLLERS)
    points = sorted({hierarchies[c].point for c in V1_CONTROLLERS})
    make_writable(node, entries, [CGROUP_ROOT, *points], "Slurm's cgroup plugin")
    if mounted_at(entries, V1_AUTODETECT) is None:
        os.makedirs(V1_AUTODETECT, exist_ok=True)
        _run_mount(node, f"{V1_AUTODETECT} for CgroupPlugin=autodetect", "--bind", hierarchies["freezer"].point,
                   V1_AUTODETECT)
    os.unshare(os.CLONE_NEWCGROUP)
    return (f"cgroup v1: {', '.join(V1_CONTROLLERS)} under {CGROUP_ROOT} writable for slurmd's cgroup/v1 "
            f"(the container's own cgroups, in a cgroup namespace rooted there); {V1_AUTODETECT} shows a v1 "
            "hierarchy for autodetect")


def on_this_kernel(node: str, purpose: str, v2: Callable[[Mount, dict[str, str]], str],
                   v1: Callable[[list[Mount], Mount, dict[str, str]], str], mountinfo: str | None = None,
                   proc_cgroup: str | None = None) -> str:
    """Run the v2 step (the cgroup2 root mount, this process's cgroups) or the v1 step (every mount,
    the tmpfs root, this process's cgroups) that fits the cgroups this container sees; raises
    CgroupError naming the node, the purpose and what it lacks."""
    try:
        entries = parse_mountinfo(mountinfo if mountinfo is not None else read("/proc/self/mountinfo"))
        own = own_cgroups(proc_cgroup if proc_cgroup is not None else read("/proc/self/cgroup"))
        root = mounted_at(entries, CGROUP_ROOT)
        if root is not None and root.fstype == "cgroup2":
            return v2(root, own)
        if root is not None and root.fstype == "tmpfs" and v1_hierarchies(entries):
            return v1(entries, root, own)
    except OSError as exc:
        raise CgroupError(f"node {node}: readying cgroups for {purpose}: {exc}") from exc
    raise CgroupError(f"node {node}: {purpose} find no cgroup file system at {CGROUP_ROOT} "
                      f"({'nothing' if root is None else root.fstype} is mounted there)")


def prepare_slurm_cgroups(node: str, mountinfo: str | None = None, proc_cgroup: str | None = None,
                          uid_map: str | None = None) -> str:
    """Make this container's cgroups writable for slurmd (in a user namespace: once they are delegated
    to it); raises CgroupError naming the node and what it lacks. Returns what was done, for the log."""
    delegated = in_user_namespace(uid_map if uid_map is not None else read("/proc/self/uid_map"))
    done = on_this_kernel(node, "Slurm's cgroup plugins", lambda root, own: _prepare_v2(node, root, own, delegated),
                          lambda entries, root, own: _prepare_v1(node, entries, root, own, delegated), mountinfo,
                          proc_cgroup)
    return done + (" (delegated to this user namespace's root)" if delegated else "")
