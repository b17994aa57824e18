"""A single-node Kubernetes on this machine: the control plane (controlplane.py) and a real node
(node.py) in one work directory. The test fixtures and `examples/quickstart.py up|down` both use it.

`up()` adopts what an earlier invocation left running in the same directory and starts only what is
missing; `down()` stops everything by PID and undoes every host change. Volumes (`volumes/`, the
jail's hostPath) survive `down()` unless `purge` is set.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.controlplane import ControlPlane
from tests.cluster.node import NODE_IP, HostState, Node, NodeError
from tests.cluster.vm_node import VmNode

DEFAULT_DIR = Path("/var/lib/soperator/local")


@dataclass
class LocalCluster:
    workdir: Path = DEFAULT_DIR

    def __post_init__(self) -> None:
        self.host = HostState(self.workdir / "host")
        self.plane = ControlPlane(self.workdir / "plane", address=NODE_IP)
        self.node = Node(self.plane, self.workdir / "node")
        # The second node (a VM, cgroup v2), started only on request; it shares the volumes (the jail).
        # Its kubelet's root at the host node's path (on the VM's own disk): the operator chart installs the
        # seccomp profile under one kubeletRootDir on every node, as on a cluster whose nodes agree.
        self.vm = VmNode(self.plane, self.workdir / "vm", shared=(self.volumes,), kubelet_dir=self.node.workdir / "kubelet")

    @property
    def volumes(self) -> Path:
        return self.workdir / "volumes"

    def start_plane(self) -> ControlPlane:
        self._reclaim_stale_owner()
        self.host.prepare()
        if not self.plane.attach():
            self.plane.stop()
            self.plane.start()  # on the ports it had, so the `kubernetes` endpoint stays right
        return self.plane

    def start_node(self) -> Node:
        if not self.node.attach():
            self.node.stop()
            self.node.start()
        return self.node

    def start_vm(self, images: list[str]) -> VmNode:
        """The second node, joined to this directory's running control plane (adopted if an earlier
        invocation started it, as `quickstart.py up` does step by step)."""
        if not self.plane.components and not self.plane.attach():
            raise NodeError("the control plane is not running: start it first (up)")
        if self.vm.attach():
            return self.vm
        self.volumes.mkdir(parents=True, exist_ok=True)
        return self.vm.start(images)

    def up(self) -> "LocalCluster":
        self.start_plane()
        self.start_node()
        return self

    def running(self) -> bool:
        """Whether any process this directory's cluster started still runs."""
        self.plane.attach()
        return any(c.alive() for c in self.plane.components + self.node.define())

    def _reclaim_stale_owner(self) -> None:
        """A node whose every process is gone (its session was killed) is undone as its own `down`
        would, so a new one can start; a live one is left to HostState.prepare to refuse."""
        owner = HostState.owner()
        if owner is None or owner == self.host.workdir:
            return
        stale = LocalCluster(owner.parent)
        if not owner.parent.exists():
            HostState.OWNER.unlink(missing_ok=True)  # its directory is gone: nothing left to undo
        elif not stale.running():
            stale.down()

    def down(self, purge: bool = False) -> None:
        self.vm.stop()
        self.node.stop()
        if not self.plane.components:
            self.plane.attach()
        self.plane.stop()
        self.host.restore()
        for name in ("plane", "node", "vm", "host"):
            shutil.rmtree(self.workdir / name, ignore_errors=True)
        if purge:
            shutil.rmtree(self.workdir, ignore_errors=True)
