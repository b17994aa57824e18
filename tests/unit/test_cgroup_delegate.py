"""The cgroup delegate (soperator/cgroup_delegate): which pods it acts for, where it finds a container's
cgroups, whose ids it gives them, and, on this host's kernel, that a user-namespaced process's root
can build cgroups under its own only once they are delegated (cgroup v1, as on the test node)."""
from __future__ import annotations

import ctypes
import os
import uuid

import pytest

from soperator.cgroup_delegate import host
from soperator.cgroup_delegate.agent import Agent, running_containers
from soperator.node.cgroups import CgroupError, await_delegation, in_user_namespace

UID = "6f0c3c1e-8d5b-4b3a-9a51-0c2f5d1e7a10"
CID = "a" * 64


def _pod(host_users=False, state="running", cid=f"containerd://{CID}"):
    spec = {} if host_users is None else {"hostUsers": host_users}
    return {"metadata": {"namespace": "ns", "name": "c-userns-0", "uid": UID}, "spec": spec,
            "status": {"containerStatuses": [{"name": "slurmd", "containerID": cid, "state": {state: {}}}]}}


def test_only_the_running_containers_of_user_namespaced_pods_are_delegated():
    assert [c.container_id for c in running_containers(_pod())] == [CID]
    assert running_containers(_pod(host_users=True)) == []
    assert running_containers(_pod(host_users=None)) == []  # the default: the node's user namespace
    assert running_containers(_pod(state="waiting")) == []
    assert running_containers(_pod(cid="")) == []


def test_root_is_a_pods_whole_range_never_the_nodes_or_a_nested_namespaces():
    assert host._root_id("         0     165536      65536\n") == 165536
    assert host._root_id("         0          0 4294967295\n") is None
    # A process of the container that made a namespace of its own maps one id: not the container's root.
    assert host._root_id("         0     166536          1\n") is None
    assert in_user_namespace("0 165536 65536") and not in_user_namespace("         0          0 4294967295")


@pytest.mark.parametrize("pod_dir,container_dir", [
    (f"kubepods/besteffort/pod{UID}", CID),  # the cgroupfs driver
    (f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice",
     f"cri-containerd-{CID}.scope"),  # the systemd driver
])
def test_a_container_is_found_under_its_pod_in_either_drivers_layout(tmp_path, pod_dir, container_dir):
    (tmp_path / pod_dir / container_dir).mkdir(parents=True)
    (tmp_path / pod_dir / ("b" * 64)).mkdir()
    (tmp_path / "kubepods" / "burstable" / "podother" / CID).mkdir(parents=True)
    assert host.find_container(str(tmp_path), UID, CID) == f"{pod_dir}/{container_dir}"
    assert host.find_container(str(tmp_path), UID, "c" * 64) is None
    assert host.find_container(str(tmp_path), str(uuid.uuid4()), CID) is None


def test_the_agent_delegates_a_container_once_and_forgets_a_deleted_pod(tmp_path):
    for controller in host.V1_DELEGATED:
        (tmp_path / controller).mkdir()
    agent = Agent(str(tmp_path), "/proc")
    agent.saw("ADDED", _pod())
    assert list(agent.pending) == [CID]
    agent.delegate_pending()  # no such cgroup here yet: still pending
    assert list(agent.pending) == [CID]
    agent.done[CID] = agent.pending.pop(CID)
    agent.saw("MODIFIED", _pod())
    assert agent.pending == {}
    agent.saw("DELETED", _pod())
    assert agent.done == {} and agent.since == {}


def test_a_worker_waits_for_its_cgroups_and_names_the_node_when_they_never_come(tmp_path):
    mine, foreign = tmp_path / "memory", tmp_path / "cpuset"
    mine.mkdir()
    foreign.mkdir()
    await_delegation("node-a", [str(mine)], seconds=0)
    os.chown(foreign, 65534, 65534)
    waits = []
    with pytest.raises(CgroupError, match=r"node node-a: .*\(hostUsers: false\).*cpuset.*cgroupDelegate"):
        await_delegation("node-a", [str(mine), str(foreign)], seconds=0.05, sleep=waits.append)
    assert waits  # it waited before giving up


# --- on this host's cgroup v1 ------------------------------------------------------------------------------

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000
HOST_BASE = 3_000_000  # the test's own range, far from the kubelet's


def _v1_host() -> bool:
    return os.geteuid() == 0 and all(os.path.exists(f"/sys/fs/cgroup/{c}/cgroup.procs") for c in host.V1_DELEGATED) \
        and not os.path.exists("/sys/fs/cgroup/cgroup.controllers")


class UsernsChild:
    """A process in the test's container cgroups, then in a user namespace of its own as its root
    (host ids HOST_BASE..): it runs one probe when told and reports what it got."""

    def __init__(self, directories: list[str], probe):
        ready_r, ready_w = os.pipe()
        go_r, self.go_w = os.pipe()
        self.result_r, result_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            for fd in (ready_r, self.go_w, self.result_r):
                os.close(fd)
            try:
                for directory in directories:
                    with open(f"{directory}/cgroup.procs", "w") as fh:
                        fh.write(str(os.getpid()))
                if LIBC.unshare(CLONE_NEWUSER) != 0:
                    raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
                os.write(ready_w, b"u")
                while os.read(go_r, 1) == b"g":
                    os.setresgid(0, 0, 0)
                    os.setresuid(0, 0, 0)
                    os.write(result_w, (probe() + "\n").encode())
            except BaseException as exc:
                os.write(ready_w, f"!{exc}".encode())
            finally:
                os._exit(0)
        for fd in (ready_w, go_r, result_w):
            os.close(fd)
        ready = os.read(ready_r, 4096)
        os.close(ready_r)
        if ready != b"u":
            self.stop()
            raise RuntimeError(f"the test's user-namespaced process did not start: {ready.decode()[1:]}")
        for name, text in (("uid_map", f"0 {HOST_BASE} 65536"), ("setgroups", "deny"),
                           ("gid_map", f"0 {HOST_BASE} 65536")):
            with open(f"/proc/{self.pid}/{name}", "w") as fh:
                fh.write(text)

    def run(self) -> str:
        os.write(self.go_w, b"g")
        out = b""
        while not out.endswith(b"\n"):
            chunk = os.read(self.result_r, 4096)
            if not chunk:
                raise RuntimeError(f"the test's user-namespaced process ended: {out.decode()}")
            out += chunk
        return out.decode().strip()

    def stop(self) -> None:
        os.close(self.go_w)
        os.waitpid(self.pid, 0)


@pytest.mark.skipif(not _v1_host(), reason="needs root on a cgroup v1 host (the test node's kind)")
def test_a_user_namespaced_root_builds_cgroups_under_its_own_only_once_delegated():
    top = f"soperator-test-delegate-{os.getpid()}"
    relative = f"{top}/pod{UID}/{CID}"
    directories = [f"/sys/fs/cgroup/{c}/{relative}" for c in host.V1_DELEGATED]
    for directory in directories:
        os.makedirs(directory)
        if directory.startswith("/sys/fs/cgroup/cpuset/"):  # a v1 cpuset takes no process until it has CPUs
            for part in (top, f"{top}/pod{UID}", relative):
                for name in ("cpuset.cpus", "cpuset.mems"):
                    with open(f"/sys/fs/cgroup/cpuset/{part}/{name}", "w") as fh:
                        fh.write(open(f"/sys/fs/cgroup/cpuset/{name}").read().strip())
    memory = f"/sys/fs/cgroup/memory/{relative}"

    def probe() -> str:
        try:
            os.mkdir(f"{memory}/job")
            with open(f"{memory}/job/memory.limit_in_bytes", "w") as fh:
                fh.write(str(100 * 2**20))
            with open(f"{memory}/job/cgroup.procs", "w") as fh:
                fh.write(str(os.getpid()))
            with open(f"/proc/{os.getpid()}/cgroup") as fh:
                return "built " + next(line for line in fh.read().splitlines() if ":memory:" in line)
        except OSError as exc:
            return f"refused {exc.strerror}"

    child = UsernsChild(directories, probe)
    try:
        assert child.run() == "refused Permission denied"
        plan = host.plan("/sys/fs/cgroup", "/proc", UID, CID)
        assert plan == host.Delegation(tuple(directories), HOST_BASE, HOST_BASE, host.V1_FILES)
        assert host.apply(plan) and not host.apply(plan)  # the second time there is nothing to change
        built = child.run()
        assert built.startswith("built ") and built.endswith(f":memory:/{relative}/job"), built
        with open(f"{memory}/job/memory.limit_in_bytes") as fh:
            assert int(fh.read()) == 100 * 2**20
        # The container's own limit stays the node's: its file was not given away.
        assert os.stat(f"{memory}/memory.limit_in_bytes").st_uid == 0
    finally:
        child.stop()
        for directory in reversed(directories):
            for path in (f"{directory}/job", directory, os.path.dirname(directory),
                         os.path.dirname(os.path.dirname(directory))):
                if os.path.isdir(path):
                    os.rmdir(path)



def test_on_v1_the_cpu_hierarchy_is_delegated_where_the_node_has_it_and_slurms_are_required(tmp_path):
    """cpu is the login nodes' (session limits), and not every v1 node mounts it on its own; Slurm's
    hierarchies every v1 node must have."""
    from soperator.node.cgroups import V1_CONTROLLERS
    for controller in V1_CONTROLLERS:
        (tmp_path / controller).mkdir()
    assert host.hierarchies(str(tmp_path)) == ([str(tmp_path / c) for c in V1_CONTROLLERS], host.V1_FILES)
    (tmp_path / "cpu").mkdir()
    assert str(tmp_path / "cpu") in host.hierarchies(str(tmp_path))[0]
    (tmp_path / "freezer").rmdir()
    with pytest.raises(host.DelegationError, match="freezer"):
        host.hierarchies(str(tmp_path))
