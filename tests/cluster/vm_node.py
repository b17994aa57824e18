"""A second Kubernetes node in a virtual machine whose kernel mounts cgroup v2, joined to the local
control plane beside the host node (node.py).

/dev/kvm here serves only paravirtual guests, so qemu emulates the machine (TCG): everything in it
runs several times slower than on the host, which the bench measures. The machine boots the cached
Debian kernel and disk (vm_image.py; the disk through `-snapshot`, so each boot starts clean) and
runs vm_guest.py as PID 1, which starts containerd, the kubelet and kube-proxy from the host's own
binaries, shared read-only over 9p.

Shared over 9p, each at the same path in the VM as on the host (so a hostPath volume names the same
files on both nodes): the node's directory (configs, certificates, image archives, logs), the
binaries, and the directories the caller names (the jail's volumes).

Network: a tap link (TAP) holds the host at HOST_SIDE and the VM at ADDRESS; the host routes the VM's
pod range through it, the VM routes everything else to the host, so pods on both nodes, the node
address, the apiserver and CoreDNS reach each other unNATed.

Side effects on the host: the tap link (and its route) and the qemu process, both removed by stop();
`host_leftovers()` names what a stop left behind.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import yaml
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.cluster.build import BIN, ensure_binaries
from tests.cluster.controlplane import ControlPlane
from tests.cluster.node import (HERE, NODE_IP, PAUSE_IMAGE, NodeError, kubelet_config, node_ready, plane_kubectl,
                                run, write_runtime_configs)
from tests.cluster.process import Component, wait_for
from tests.cluster.vm_image import VM_CACHE, ensure_image
from tests.cluster.virtiofsd import BINARY as VIRTIOFSD
from tests.cluster.virtiofsd import ensure_virtiofsd

NAME = "soperator-vm-node"
TAP = "soperator-vm0"
HOST_SIDE = "10.217.2.1"
ADDRESS = "10.217.2.2"
LINK = 30
POD_CIDR = "10.217.3.0/24"
BRIDGE = "soperator1"
KUBELET_PORT = 10250
# Only pods that ask run on the emulated node: an image must be imported into it first, and everything
# there is slower. Pods placed on it tolerate this taint (TOLERATION) and select it by hostname.
TAINT = {"key": "soperator.dev/emulated-node", "effect": "NoSchedule"}
TOLERATION = {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
STORE_SIZE = "16G"
# One host thread runs both virtual CPUs in turn. With a thread each (qemu's default), boots on this
# 2-core machine with one core kept busy took 28.0 s to Ready against 21.3 s (medians of 24 and 8
# boots, one session), and the one boot that never came up (CI, 2026-11-27: a guest CPU stuck 15
# minutes in the slab allocator's per-CPU compare-and-swap loop) ran with a thread each.
TCG_THREADS = "single"
# A guest CPU stuck in the kernel for two minutes (the longest the soft-lockup watchdog allows) is a
# hung machine, not a slow one: the kernel panics, qemu exits (-no-reboot) and the wait names the
# lockup at once instead of running out its 15 minutes. Shorter stalls (the host busy) stay warnings.
LOCKUP_PANIC = "watchdog_thresh=60 softlockup_panic=1"


class ImageStore:
    """The VM's containerd root: a sparse ext4 disk in the cache, and which podman image IDs it holds."""

    def __init__(self, disk: Path):
        self.disk, self.stamps = disk, disk.with_suffix(".json")

    def missing(self, refs: list[str]) -> list[str]:
        from images.podman import podman

        if not self.disk.exists():
            self.disk.parent.mkdir(parents=True, exist_ok=True)
            run("mkfs.ext4", "-q", "-F", "-L", "containerd", str(self.disk), STORE_SIZE)
            self.forget()
        held = json.loads(self.stamps.read_text()) if self.stamps.exists() else {}
        self._ids = {ref: podman("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip() for ref in refs}
        return [ref for ref in refs if held.get(ref) != self._ids[ref]]

    def record(self, refs: list[str]) -> None:
        held = json.loads(self.stamps.read_text()) if self.stamps.exists() else {}
        self.stamps.write_text(json.dumps(held | {ref: self._ids[ref] for ref in refs}, indent=1, sort_keys=True))

    def forget(self) -> None:
        self.stamps.unlink(missing_ok=True)


class VmNode:
    def __init__(self, plane: ControlPlane, workdir: Path, shared: tuple[Path, ...] = (), memory_mb: int = 3072,
                 cpus: int = 2, kubelet_dir: Path = Path("/var/lib/kubelet")):
        """`kubelet_dir`: the kubelet's --root-dir in the VM (on its own disk)."""
        self.plane, self.workdir, self.shared, self.kubelet_dir = plane, workdir, shared, kubelet_dir
        self.memory_mb, self.cpus = memory_mb, cpus
        self.logs = workdir / "logs"
        self.qemu: Component | None = None
        self.phases: dict[str, float] = {}
        self.store = ImageStore(VM_CACHE / "containerd.img")

    # --- start -----------------------------------------------------------------------------------

    def attach(self) -> bool:
        """Whether a VM an earlier invocation started from this directory still runs and is Ready."""
        self.qemu = self.qemu or self._stopper()
        return self.qemu.alive() and self._ready()

    def start(self, images: list[str], timeout: float = 900) -> "VmNode":
        # Built on first use (not by .ci/setup: the quick start's one node needs neither), before the
        # start's own deadlines begin: a cold build takes minutes.
        image = ensure_image()
        ensure_virtiofsd()
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        for flag in ("guest.ready", "guest.stop", "guest.failed"):
            (self.workdir / flag).unlink(missing_ok=True)
        shutil.copy(HERE / "vm_guest.py", self.workdir / "vm_guest.py")
        archives = self._save_images(images)
        self._write_configs(archives)
        self._link_up()
        self._start_virtiofsd(deadline=began + 60)
        self.qemu = self._define(image)
        self.qemu.start()
        self.phases["prepared"] = time.monotonic() - began
        deadline = began + timeout
        try:
            self._wait(lambda: (self.workdir / "guest.ready").exists(), deadline, "the guest's services")
            self.phases["booted"] = time.monotonic() - began
            (self.workdir / "images.tar").unlink(missing_ok=True)  # imported by now
            self._wait(self._ready, deadline, "the node's Ready condition")
            self.phases["ready"] = time.monotonic() - began
        except NodeError:
            self.store.forget()  # the import may not have finished
            self.stop()
            raise
        return self

    def _shares(self) -> list[tuple[str, Path, bool]]:
        """(9p tag, host path, read-only) of each of the node's own directories the VM mounts at the
        same path."""
        return [("node", self.workdir, False), ("bin", BIN, True)]

    def _virtiofs(self) -> list[tuple[str, Path, Component]]:
        """(virtio-fs tag, host path, its virtiofsd) of each shared directory (the volumes, the jail
        among them), which pods may mount idmapped."""
        daemons = []
        for i, path in enumerate(self.shared):
            # chroot: no sandbox process of its own, so the PID file names the one to stop. cache=never:
            # both sides write these files, and each reads what the other wrote.
            argv = [str(VIRTIOFSD), f"--socket-path={self._socket(f'share{i}')}", f"--shared-dir={path}", "--cache=never",
                    "--xattr", "--sandbox=chroot", "--log-level=warn"]
            daemons.append((f"share{i}", path, Component(f"virtiofsd-share{i}", argv, self.logs / f"virtiofsd-share{i}.log")))
        return daemons

    def _socket(self, tag: str) -> Path:
        """Where a share's virtiofsd listens for qemu (virtiofsd writes `<socket>.pid` beside it)."""
        return self.workdir / f"{tag}.sock"

    def daemons(self) -> list[Component]:
        """The host processes this node runs: qemu and each share's virtiofsd."""
        return [self.qemu or self._stopper(), *(daemon for _, _, daemon in self._virtiofs())]

    def _start_virtiofsd(self, deadline: float) -> None:
        for tag, _, daemon in self._virtiofs():
            socket = self._socket(tag)
            socket.unlink(missing_ok=True)
            daemon.start()
            wait_for(daemon, socket.exists, deadline, NodeError)

    def _define(self, image) -> Component:
        argv = ["qemu-system-x86_64", "-accel", f"tcg,thread={TCG_THREADS}", "-m", str(self.memory_mb),
                "-smp", str(self.cpus), "-nographic", "-no-reboot", "-kernel", str(image.kernel), "-initrd", str(image.initrd),
                "-append", f"console=ttyS0 panic=-1 {LOCKUP_PANIC} soperator.node={self.workdir}",
                "-drive", f"file={image.disk},if=virtio,format=raw,snapshot=on",
                "-drive", f"file={self.store.disk},if=virtio,format=raw",
                "-netdev", f"tap,id=net0,ifname={TAP},script=no,downscript=no",
                "-device", "virtio-net-pci,netdev=net0"]
        for tag, path, readonly in self._shares():
            argv += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=passthrough"
                     + (",readonly=on" if readonly else "")]
        if self.shared:  # vhost-user devices reach the guest's memory through a shared file
            argv += ["-object", f"memory-backend-memfd,id=mem,size={self.memory_mb}M,share=on",
                     "-machine", "memory-backend=mem"]
        for tag, _, _ in self._virtiofs():
            argv += ["-chardev", f"socket,id={tag},path={self._socket(tag)}",
                     "-device", f"vhost-user-fs-pci,chardev={tag},tag={tag}"]
        argv[0] = shutil.which(argv[0]) or argv[0]
        return Component("qemu", argv, self.logs / "console.log")

    def _wait(self, ready, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            if not self.qemu.alive():
                raise NodeError(f"the VM exited while waiting for {what}{self._lockup()}:\n{self.tail()}")
            if (self.workdir / "guest.failed").exists():
                raise NodeError(f"the VM's guest failed: {(self.workdir / 'guest.failed').read_text()}\n{self.tail()}")
            if ready():
                return
            time.sleep(1)
        raise NodeError(f"the VM node is not up in time ({what}):\n{self.tail()}")

    def _lockup(self) -> str:
        console = self.logs / "console.log"
        text = console.read_text(errors="replace") if console.exists() else ""
        found = [line for line in text.splitlines() if "soft lockup" in line or "Kernel panic" in line]
        return f" ({'; '.join(found[-2:]).strip()})" if found else ""

    def tail(self) -> str:
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-25:]
            parts.append(f"----- {log.name} -----\n" + "\n".join(lines))
        return "\n".join(parts)

    def _ready(self) -> bool:
        return node_ready(self.plane, NAME)

    def _save_images(self, images: list[str]) -> list[str]:
        """The images the VM's store lacks (by podman image ID), saved into one archive it imports at boot."""
        from images.podman import podman

        todo = self.store.missing([PAUSE_IMAGE, *images])
        self.phases["images to import"] = len(todo)
        if not todo:
            return []
        archive = self.workdir / "images.tar"
        podman("save", "-m", "--format", "docker-archive", "-o", str(archive), *todo)
        self.store.record(todo)  # written before the boot imports them: a failed boot forgets the store
        return [str(archive)]

    def _link_up(self) -> None:
        run("ip", "link", "del", TAP, check=False)
        run("ip", "tuntap", "add", "dev", TAP, "mode", "tap")
        run("ip", "addr", "add", f"{HOST_SIDE}/{LINK}", "dev", TAP)
        run("ip", "link", "set", TAP, "up")
        run("ip", "route", "replace", POD_CIDR, "via", ADDRESS, "dev", TAP)

    def _write_configs(self, archives: list[str]) -> None:
        work, pki, bins = self.workdir, self.plane.pki, ensure_binaries()
        certs = work / "pki"
        certs.mkdir(exist_ok=True)

        def copy(pair: tuple[Path, Path]) -> tuple[Path, Path]:
            return tuple(Path(shutil.copy(p, certs / p.name)) for p in pair)

        ca = Path(shutil.copy(pki.ca_cert, certs / "ca.crt"))
        node_cert = copy(pki.issue(f"system:node:{NAME}", "system:nodes", ExtendedKeyUsageOID.CLIENT_AUTH))
        serving = copy(pki.issue(f"kubelet-serving-{NAME}", None, ExtendedKeyUsageOID.SERVER_AUTH, dns=[NAME],
                                 ips=[ADDRESS]))
        proxy = copy(pki.issue("system:kube-proxy", None, ExtendedKeyUsageOID.CLIENT_AUTH))
        for name, (cert, key) in {"kubelet": node_cert, "kube-proxy": proxy}.items():
            self.plane.write_kubeconfig(work / f"{name}.kubeconfig", cert, key, ca=ca)
        socket = "/run/containerd/containerd.sock"
        write_runtime_configs(work, root="/var/lib/containerd", state="/run/containerd", socket=socket, bridge=BRIDGE,
                              pod_cidr=POD_CIDR, ipam_dir="/var/lib/cni-ipam")
        (work / "resolv.conf").write_text(f"nameserver {NODE_IP}\n")
        (work / "kubelet.yaml").write_text(yaml.safe_dump(kubelet_config(
            ADDRESS, KUBELET_PORT, serving, ca, socket, memory_reserve="50Mi", resolvConf=str(work / "resolv.conf"),
            maxPods=30, registerWithTaints=[TAINT],
            # Emulation is slow: the default 4 minutes for a runtime request is not always enough.
            runtimeRequestTimeout="15m")))
        (work / "kube-proxy.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(work / "kube-proxy.kubeconfig")},
            "hostnameOverride": NAME, "mode": "iptables", "clusterCIDR": POD_CIDR,
            "nodePortAddresses": [f"{ADDRESS}/32"], "conntrack": {"maxPerCore": 0},
        }))
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        (work / "config.json").write_text(json.dumps({
            "name": NAME, "address": f"{ADDRESS}/{LINK}", "gateway": HOST_SIDE, "path": path,
            "containerd_socket": socket, "ctr": str(bins["ctr"]), "archives": archives,
            "shares": [{"tag": tag, "path": str(path), "readonly": readonly, "kind": "9p"}
                       for tag, path, readonly in self._shares() if tag != "node"]  # "node": mounted by the disk's init
            + [{"tag": tag, "path": str(path), "readonly": False, "kind": "virtiofs"} for tag, path, _ in self._virtiofs()],
            "processes": [
                ["containerd", [str(bins["containerd"]), "--config", str(work / "containerd.toml")]],
                ["kubelet", [str(bins["kubelet"]), f"--config={work / 'kubelet.yaml'}",
                             f"--kubeconfig={work / 'kubelet.kubeconfig'}", f"--root-dir={self.kubelet_dir}",
                             "--cert-dir=/var/lib/kubelet/pki", f"--node-ip={ADDRESS}", f"--hostname-override={NAME}",
                             "--v=1"]],
                ["kube-proxy", [str(bins["kube-proxy"]), f"--config={work / 'kube-proxy.yaml'}", "--v=1"]],
            ],
        }, indent=1))

    # --- stop ------------------------------------------------------------------------------------

    def stop(self, grace: float = 120) -> None:
        """Ask the guest to stop its services and power off (the image store's disk closes cleanly), then
        stop qemu by PID if it has not ended; then the link. The root disk's writes were never kept."""
        self.qemu = self.qemu or self._stopper()
        if self.qemu.alive() and self.workdir.exists():
            (self.workdir / "guest.stop").write_text("")
            deadline = time.monotonic() + grace
            while self.qemu.alive() and time.monotonic() < deadline:
                time.sleep(0.5)
        self.qemu.stop(grace=5)
        for tag, _, daemon in self._virtiofs():
            daemon.stop(grace=5)
            socket = self._socket(tag)
            for left in (socket, socket.with_name(socket.name + ".pid")):
                left.unlink(missing_ok=True)
        run("ip", "link", "del", TAP, check=False)
        if self.plane.components and all(c.alive() for c in self.plane.components):
            # A node that will not come back: its Node object goes too, as a cloud's node controller does.
            plane_kubectl(self.plane, "delete", "node", NAME, "--ignore-not-found", check=False)


    def _stopper(self) -> Component:
        """The qemu process by its PID file alone (its PID is checked to still run qemu)."""
        return Component("qemu", [shutil.which("qemu-system-x86_64") or "qemu-system-x86_64"], self.logs / "console.log")


def host_leftovers() -> list[str]:
    found = []
    if run("ip", "link", "show", TAP, check=False).returncode == 0:
        found.append(f"link {TAP}")
    if POD_CIDR in run("ip", "route", "show", check=False).stdout:
        found.append(f"route {POD_CIDR}")
    return found
