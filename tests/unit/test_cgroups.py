"""What the worker reads of its cgroup mounts (soperator/node/cgroups.py), from the mountinfo lines of
real worker containers: on the VM node (cgroup v2, containerd 2.4) and on the host node (cgroup v1)."""
from __future__ import annotations

import pytest

from soperator.node.mounts import parse_mountinfo
from soperator.node.cgroups import (CGROUP_ROOT, CgroupError, missing_controllers, mounted_at, own_cgroups,
                                    prepare_slurm_cgroups, v1_hierarchies)

V2 = """\
1480 1479 0:25 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
1481 1480 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate,memory_recursiveprot
"""
V1 = """\
2001 2000 0:80 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
2002 2001 0:81 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
2003 2002 0:30 /kubepods/pod1/c1 /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime master:11 - cgroup cgroup rw,cpu,cpuacct
2004 2002 0:31 /kubepods/pod1/c1 /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime master:12 - cgroup cgroup rw,memory
2005 2002 0:32 /kubepods/pod1/c1 /sys/fs/cgroup/freezer ro,nosuid,nodev,noexec,relatime master:13 - cgroup cgroup rw,freezer
2006 2002 0:33 /kubepods/pod1/c1 /sys/fs/cgroup/devices ro,nosuid,nodev,noexec,relatime master:14 - cgroup cgroup rw,devices
2007 2002 0:34 /kubepods/pod1/c1 /sys/fs/cgroup/cpuset ro,nosuid,nodev,noexec,relatime master:15 - cgroup cgroup rw,cpuset
"""
# /proc/self/cgroup of the v1 container: the host's cgroup namespace, its own cgroups.
V1_OWN = """6:cpuset:/kubepods/pod1/c1
5:devices:/kubepods/pod1/c1
4:freezer:/kubepods/pod1/c1
3:memory:/kubepods/pod1/c1
2:cpu,cpuacct:/kubepods/pod1/c1
1:name=systemd:/
0::/
"""


def test_v2_root_is_seen_read_only_with_its_super_options():
    root = mounted_at(parse_mountinfo(V2), CGROUP_ROOT)
    assert root.fstype == "cgroup2" and root.read_only and root.root == "/"
    assert "nsdelegate" in root.super_options


def test_the_last_mount_at_a_point_is_the_one_seen():
    over = V2 + "1490 1481 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n"
    root = mounted_at(parse_mountinfo(over), CGROUP_ROOT)
    assert not root.read_only and root.super_options == ("rw",)


def test_v1_hierarchies_by_controller_with_cpu_and_cpuacct_sharing_a_mount():
    entries = parse_mountinfo(V1)
    assert mounted_at(entries, CGROUP_ROOT).fstype == "tmpfs"
    found = v1_hierarchies(entries)
    assert {c: m.point for c, m in found.items()} == {
        "cpu": f"{CGROUP_ROOT}/cpu,cpuacct", "cpuacct": f"{CGROUP_ROOT}/cpu,cpuacct",
        "memory": f"{CGROUP_ROOT}/memory", "freezer": f"{CGROUP_ROOT}/freezer",
        "devices": f"{CGROUP_ROOT}/devices", "cpuset": f"{CGROUP_ROOT}/cpuset"}
    assert all(m.read_only for m in found.values())
    assert v1_hierarchies(parse_mountinfo(V2)) == {}


def test_missing_v2_controllers_are_named():
    assert missing_controllers("cpuset cpu io memory pids") == []
    assert missing_controllers("cpu io pids") == ["cpuset", "memory"]


def test_octal_escapes_and_non_controller_options():
    entry = parse_mountinfo("7 1 0:9 /a\\040b /x\\011y rw - cgroup cgroup rw,xattr,name=x,memory\n")[0]
    assert (entry.root, entry.point) == ("/a b", "/x\ty")
    at_root = parse_mountinfo("7 1 0:9 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,xattr,clone_children,memory\n")
    assert list(v1_hierarchies(at_root)) == ["memory"]


def test_lines_of_other_shapes_are_skipped():
    assert parse_mountinfo("garbage\n\n12 1 0:1 / /x rw - \n") == []


def test_own_cgroups_by_controller():
    own = own_cgroups(V1_OWN)
    assert own["cpu"] == own["cpuacct"] == own["memory"] == "/kubepods/pod1/c1"
    assert own[""] == "/" and own["name=systemd"] == "/"
    assert own_cgroups("0::/\n") == {"": "/"}


def test_a_node_without_what_slurm_needs_is_named_with_what_it_lacks():
    sysfs_only = "1480 1479 0:25 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
    with pytest.raises(CgroupError, match=r"node n1: Slurm's cgroup plugins find no cgroup file system at "
                                          r"/sys/fs/cgroup \(nothing is mounted there\)"):
        prepare_slurm_cgroups("n1", sysfs_only, "0::/\n")
    no_devices = "".join(line + "\n" for line in V1.splitlines() if "devices" not in line)
    with pytest.raises(CgroupError, match="node n2: cgroup v1 without the hierarchies devices that Slurm's "
                                          "cgroup/v1 plugin needs"):
        prepare_slurm_cgroups("n2", no_devices, V1_OWN)


def test_cgroup_mounts_that_show_the_nodes_tree_are_refused():
    """A privileged pod, or a runtime that shares the node's cgroup namespace and mounts the whole
    tree: made writable, Slurm would build on the node's cgroups."""
    with pytest.raises(CgroupError, match="node n3: the container is not in a cgroup namespace of its own"):
        prepare_slurm_cgroups("n3", V2, "0::/kubepods/pod1/c1\n")
    whole_memory = V1.replace("/kubepods/pod1/c1 /sys/fs/cgroup/memory", "/ /sys/fs/cgroup/memory")
    with pytest.raises(CgroupError, match="node n4: /sys/fs/cgroup/memory shows /, not the container's own cgroup "
                                          "/kubepods/pod1/c1"):
        prepare_slurm_cgroups("n4", whole_memory, V1_OWN)


def _pod(name: str, message: str | None, last: bool = True) -> dict:
    term = {"terminated": {"exitCode": 1, "message": message}} if message is not None else {}
    status = {"lastState": term, "state": {"waiting": {"reason": "CrashLoopBackOff"}}} if last else {"state": term}
    return {"metadata": {"name": name}, "status": {"containerStatuses": [status]}}


def test_workers_ready_names_each_worker_whose_node_cannot_give_slurm_its_cgroups():
    from soperator.node.layout import CGROUPS_UNAVAILABLE
    from soperator.reconcile.ready_condition import ready_condition
    refused = f"{CGROUPS_UNAVAILABLE}node k1: the container's cgroup lacks the controllers cpuset"
    cond = ready_condition("Workers", 1, 3, [_pod("c-cpu-0", None), _pod("c-cpu-1", refused),
                                             _pod("c-cpu-2", "something else", last=False)])
    assert (cond.ok, cond.reason) == (False, "CgroupsUnavailable")
    assert cond.message == "1/3 ready; c-cpu-1: node k1: the container's cgroup lacks the controllers cpuset"
    assert ready_condition("Workers", 1, 3, [_pod("c-cpu-2", "something else")]).reason == "NotReady"
    assert ready_condition("Workers", 3, 3, []).reason == "AllReady"
    recovered = _pod("c-cpu-1", refused)
    recovered["status"]["containerStatuses"][0]["ready"] = True
    assert ready_condition("Workers", 2, 3, [recovered]).reason == "NotReady"
    many = ready_condition("Workers", 0, 5, [_pod(f"c-cpu-{i}", refused) for i in range(5)])
    assert many.message.count("c-cpu-") == 3 and many.message.endswith("; and 2 more")


def test_workers_ready_names_a_user_namespaced_worker_whose_node_keeps_dev_fuse_closed():
    from soperator.node.layout import FUSE_UNAVAILABLE
    from soperator.node.roles import closed_fuse
    from soperator.reconcile.ready_condition import ready_condition
    refused = f"{FUSE_UNAVAILABLE}{closed_fuse('k1', '/dev/fuse', 0o600)}"
    cond = ready_condition("Workers", 0, 1, [_pod("c-box-0", refused)])
    assert (cond.ok, cond.reason) == (False, "FuseUnavailable")
    assert cond.message.startswith("0/1 ready; c-box-0: node k1: its /dev/fuse is mode 0600")


def test_login_ready_names_a_login_node_that_cannot_ready_its_users_cgroups():
    from soperator.node.layout import CGROUPS_UNAVAILABLE
    from soperator.reconcile.ready_condition import ready_condition
    refused = f"{CGROUPS_UNAVAILABLE}node k1: the login container's cgroup lacks the controllers cpu"
    cond = ready_condition("Login", 0, 1, [_pod("c-login-0", refused)])
    assert (cond.type, cond.ok, cond.reason) == ("LoginReady", False, "CgroupsUnavailable")
    assert cond.message == "0/1 ready; c-login-0: node k1: the login container's cgroup lacks the controllers cpu"


def test_a_user_namespaced_worker_on_cgroup_v1_refuses_slurms_cgroups_naming_the_kernels_rule():
    """v1 lets only the node's root move another user's task between cgroups; slurmstepd in a user
    namespace never is, so a user's every step would fail: refused before slurmd starts."""
    with pytest.raises(CgroupError, match=r"node node-a: .*user namespace.*cgroup v1.*only the node's root.*"
                                          r"cgroup v2"):
        prepare_slurm_cgroups("node-a", mountinfo=V1, proc_cgroup=V1_OWN, uid_map="         0     165536      65536")
