"""Hand a user-namespaced container its own cgroups, as systemd does for runc on nodes that use it.

A pod with `hostUsers: false` runs as an unprivileged range of host ids: its root cannot write the
cgroups the runtime made for it, which belong to the node's root, so Slurm's cgroup plugins cannot
build a job's cgroups there. The runtime delegates them only with the systemd cgroup driver (runc
chowns the container's cgroup where containerd mounts it writable, `cgroup_writable`); on other
nodes this module does the same from the operator chart's DaemonSet: it gives the container's root
the container's own cgroup directory and the files that move processes (cgroup v2: the kernel's own
list, /sys/kernel/cgroup/delegate; v1: cgroup.procs and tasks), in each hierarchy Slurm uses. The
limits of that cgroup stay the node's: the container may make children and set theirs, within its
own, never raise its own (the files that hold them keep their owner).

What cgroup v1's device controller needs (CAP_SYS_ADMIN in the node's user namespace) is not given:
device confinement stays out of reach of a user-namespaced worker (the API refuses gres there).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from soperator.node.cgroups import V1_CONTROLLERS
from soperator.node.session_limits import CONTROLLERS as SESSION_CONTROLLERS

# Slurm's hierarchies for workers, which every v1 node must have, and cpu for login nodes' session
# limits where the node has it (a hierarchy of its own on nodes that do not mount it with cpuacct, as the
# test node does); a login node without it says so itself.
V1_DELEGATED = tuple(dict.fromkeys(V1_CONTROLLERS + SESSION_CONTROLLERS))
V1_FILES = ("cgroup.procs", "tasks")
V2_FILES = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")
KERNEL_DELEGATE_LIST = "/sys/kernel/cgroup/delegate"
# How deep under a hierarchy a pod's cgroup may be (kubepods/<qos>/pod<uid>, or the systemd
# driver's kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice).
POD_DEPTH = 4
# The ids the kubelet maps for each user-namespaced pod.
POD_IDS = 65536


class DelegationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Delegation:
    """A container's cgroup directories, one per hierarchy, and its root's host ids."""
    directories: tuple[str, ...]
    uid: int
    gid: int
    files: tuple[str, ...]


def hierarchies(cgroup_root: str) -> tuple[list[str], tuple[str, ...]]:
    """(the hierarchies to delegate in, the files to give in each) on this node's cgroups."""
    if os.path.exists(os.path.join(cgroup_root, "cgroup.controllers")):
        try:
            with open(KERNEL_DELEGATE_LIST, encoding="utf-8") as fh:
                files = tuple(fh.read().split()) or V2_FILES
        except OSError:
            files = V2_FILES
        return [cgroup_root], files
    found = [os.path.join(cgroup_root, c) for c in V1_DELEGATED
             if c in V1_CONTROLLERS or os.path.isdir(os.path.join(cgroup_root, c))]
    missing = [p for p in found if not os.path.isdir(p)]
    if missing:
        raise DelegationError(f"cgroup v1 without {', '.join(missing)}")
    return found, V1_FILES


def _is_pod_dir(name: str, pod_uid: str) -> bool:
    return name == f"pod{pod_uid}" or name.endswith(f"-pod{pod_uid.replace('-', '_')}.slice")


def _is_container_dir(name: str, container_id: str) -> bool:
    return name == container_id or name.endswith(f"-{container_id}.scope")


def find_container(hierarchy: str, pod_uid: str, container_id: str) -> str | None:
    """The container's cgroup directory under `hierarchy` (relative to it), found under its pod's."""
    level = [""]
    for _ in range(POD_DEPTH):
        below = []
        for relative in level:
            try:
                entries = [e for e in os.scandir(os.path.join(hierarchy, relative)) if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for entry in entries:
                path = os.path.join(relative, entry.name)
                if _is_pod_dir(entry.name, pod_uid):
                    for inner in os.scandir(os.path.join(hierarchy, path)):
                        if inner.is_dir(follow_symlinks=False) and _is_container_dir(inner.name, container_id):
                            return os.path.join(path, inner.name)
                    return None
                below.append(path)
        level = below
    return None


def _root_id(map_text: str) -> int | None:
    """The host id that id 0 maps to in /proc/<pid>/{uid,gid}_map, where it maps a pod's whole range;
    None where the map is the node's own, or a nested namespace's (a process of the container that
    made one maps a few ids only: its root must not be taken for the container's)."""
    for line in map_text.splitlines():
        inside, outside, count = (int(v) for v in line.split())
        if inside == 0:
            return outside if outside > 0 and count >= POD_IDS else None
    return None


def root_ids(proc_root: str, pid: int) -> tuple[int, int] | None:
    """(uid, gid) of the container root of `pid` on the node; None where it is the node's root."""
    ids = []
    for name in ("uid_map", "gid_map"):
        with open(os.path.join(proc_root, str(pid), name), encoding="utf-8") as fh:
            ids.append(_root_id(fh.read()))
    return None if None in ids else (ids[0], ids[1])


def _first_pid(directory: str) -> int | None:
    with open(os.path.join(directory, "cgroup.procs"), encoding="utf-8") as fh:
        pids = fh.read().split()
    return int(pids[0]) if pids else None


def plan(cgroup_root: str, proc_root: str, pod_uid: str, container_id: str) -> Delegation | None:
    """What delegating this container takes; None while its cgroup or its first process is not there
    yet. Raises DelegationError for a container that is not in a user namespace of its own."""
    roots, files = hierarchies(cgroup_root)
    relative = find_container(roots[0], pod_uid, container_id)
    if relative is None:
        return None
    directories = tuple(os.path.join(h, relative) for h in roots)
    pid = _first_pid(directories[0])
    if pid is None:
        return None
    try:
        ids = root_ids(proc_root, pid)
    except OSError:
        return None  # the process has just gone: the container is restarting
    if ids is None:
        raise DelegationError(f"container {container_id} of pod {pod_uid} runs in the node's user namespace: "
                              "its cgroups stay the node's")
    return Delegation(directories, ids[0], ids[1], files)


def apply(delegation: Delegation) -> bool:
    """Give the container's root its directories and their files; True where anything changed."""
    changed = False
    for directory in delegation.directories:
        for path in (directory, *(os.path.join(directory, f) for f in delegation.files)):
            try:
                st = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                continue  # a v2 file of a controller this kernel lacks
            if (st.st_uid, st.st_gid) != (delegation.uid, delegation.gid):
                os.chown(path, delegation.uid, delegation.gid, follow_symlinks=False)
                changed = True
    return changed
