"""The second node's machine: a Debian kernel that mounts cgroup v2, and a root disk, built once and
cached.

Built with no kernel installed and nothing mounted on the host: the kernel package is downloaded and
unpacked (`apt-get download`, `dpkg-deb -x`), the root file system is a debootstrap of bookworm made
into an ext4 image by `mkfs.ext4 -d`, and the initramfs (busybox, the few modules needed to reach the
disk, an init that loads them and switches to it) is written by busybox's cpio. The VM boots the disk
with qemu's `-snapshot`, so the cached image is never written. Everything the node runs (containerd,
runc, kubelet, kube-proxy) reaches it over 9p at boot, so rebuilding them never rebuilds this.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.build import CACHE
from tests.cluster.node import unmount_under

VM_CACHE = CACHE / "vm"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What the node needs beyond minbase: modules loaded on demand (kmod), the kube-proxy's iptables, the
# runtime's libseccomp, the CNI plugins, and Python for the guest's init (tests/cluster/vm_guest.py).
PACKAGES = ("kmod", "iproute2", "iptables", "libseccomp2", "containernetworking-plugins", "libpython3.11-stdlib", "python3-minimal",
            "procps", "util-linux", "mount")
# The initramfs only has to reach the root disk: virtio's PCI transport, the block driver, ext4 and the
# checksum it verifies metadata with (loaded on demand on a full system, and nothing loads on demand
# in the initramfs).
BOOT_MODULES = ("virtio_pci", "virtio_blk", "ext4", "crc32c_generic")
DISK_SIZE = "3G"
INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
{insmods}
/bin/busybox mount /dev/vda /newroot || exec /bin/busybox sh
/bin/busybox mount -o move /dev /newroot/dev
/bin/busybox mount -o move /proc /newroot/proc
exec /bin/busybox switch_root /newroot /usr/local/sbin/soperator-vm-init
"""
# The root's own init: mount the node's share (its host path is on the kernel's command line, and it
# is mounted at that same path, so the host's config files name the VM's paths too) and hand over to
# the guest program there.
ROOT_INIT = """#!/usr/bin/python3
import os, subprocess
share = dict(a.split("=", 1) for a in open("/proc/cmdline").read().split() if "=" in a)["soperator.node"]
subprocess.run(["mount", "-t", "sysfs", "sysfs", "/sys"], check=True)
subprocess.run(["modprobe", "-a", "9p", "9pnet_virtio"], check=True)
os.makedirs(share, exist_ok=True)
subprocess.run(["mount", "-t", "9p", "-o", "trans=virtio,version=9p2000.L,msize=262144,cache=none", "node", share],
               check=True)
os.execv("/usr/bin/python3", ["python3", os.path.join(share, "vm_guest.py")])
"""


class VmImageError(RuntimeError):
    pass


@dataclass(frozen=True)
class VmImage:
    kernel: Path
    initrd: Path
    disk: Path
    release: str


def _run(*argv: str, **kwargs) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise VmImageError(f"`{' '.join(argv)}` exited {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}")
    return proc.stdout


def kernel_package() -> str:
    """The package `linux-image-amd64` points at today (bookworm's archive keeps only the newest)."""
    out = _run("apt-cache", "depends", "linux-image-amd64")
    match = re.search(r"Depends: (linux-image-[0-9][^\s]*-amd64)", out)
    if not match:
        raise VmImageError(f"no kernel package behind linux-image-amd64: {out[:500]}")
    return match[1]


def _key(package: str) -> str:
    digest = hashlib.sha256("\n".join([package, SUITE, *PACKAGES, *BOOT_MODULES, INIT, ROOT_INIT,
                                       DISK_SIZE]).encode())
    return f"{package.removeprefix('linux-image-')}-{digest.hexdigest()[:12]}"


def ensure_image(cache: Path = VM_CACHE) -> VmImage:
    package = kernel_package()
    release = package.removeprefix("linux-image-")
    out = cache / _key(package)
    image = VmImage(out / "vmlinuz", out / "initrd.img", out / "root.img", release)
    if image.disk.exists():
        return image
    cache.mkdir(parents=True, exist_ok=True)
    base = _debootstrap(cache)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        kernel = _unpack_kernel(package, work)
        root = work / "root"
        _run("cp", "-a", str(base), str(root))
        shutil.copytree(kernel / "lib" / "modules", root / "lib" / "modules", dirs_exist_ok=True)
        _run("chroot", str(root), "depmod", release)
        init = root / "usr" / "local" / "sbin" / "soperator-vm-init"
        init.write_text(ROOT_INIT)
        init.chmod(0o755)
        # The kubelet reads the machine id; each boot is the same machine, a fresh disk.
        (root / "etc" / "machine-id").write_text(hashlib.md5(b"soperator-vm-node").hexdigest() + "\n")
        staging = work / "out"
        staging.mkdir()
        shutil.copy(kernel / "boot" / f"vmlinuz-{release}", staging / "vmlinuz")
        _initramfs(kernel / "lib" / "modules" / release, staging / "initrd.img", work / "initramfs")
        _run("mkfs.ext4", "-q", "-F", "-L", "root", "-d", str(root), str(staging / "root.img"), DISK_SIZE)
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    for old in cache.glob("*-amd64-*"):  # images of an older kernel or package list: ~1 GB each
        if old != out and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return image


def _unpack_kernel(package: str, work: Path) -> Path:
    _run("apt-get", "download", package, cwd=work)
    deb = next(work.glob(f"{package}_*.deb"))
    kernel = work / "kernel"
    _run("dpkg-deb", "-x", str(deb), str(kernel))
    return kernel


def _debootstrap(cache: Path) -> Path:
    """The Debian root, kept on its own: the slow part, which only the suite and packages change."""
    digest = hashlib.sha256("\n".join([SUITE, MIRROR, *PACKAGES]).encode()).hexdigest()[:12]
    root = cache / f"debootstrap-{SUITE}-{digest}"
    if (root / "etc" / "debian_version").exists():
        return root
    partial = root.with_name(root.name + ".partial")
    unmount_under(partial)
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _run("debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(partial), MIRROR,
             timeout=1800)
    finally:
        unmount_under(partial)  # debootstrap mounts proc and sys in the target; a failed one leaves them
    shutil.rmtree(partial / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    partial.rename(root)
    return root


def module_order(modules: Path, names: tuple[str, ...]) -> list[Path]:
    """The .ko files for `names` and what they depend on, each after its dependencies."""
    files = {p.name.removesuffix(".ko").replace("-", "_"): p for p in modules.rglob("*.ko")}
    ordered: list[Path] = []

    def visit(name: str) -> None:
        path = files.get(name.replace("-", "_"))
        if path is None:
            raise VmImageError(f"module {name} not found under {modules}")
        if path in ordered:
            return
        for dep in _depends(path):
            visit(dep)
        ordered.append(path)

    for name in names:
        visit(name)
    return ordered


def _depends(module: Path) -> list[str]:
    match = re.search(rb"\0depends=([^\0]*)\0", module.read_bytes())
    return [d for d in match[1].decode().split(",") if d] if match else []


def _initramfs(modules: Path, target: Path, work: Path) -> None:
    for sub in ("bin", "proc", "dev", "newroot", "lib/modules"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    os.mknod(work / "dev" / "console", 0o600 | stat.S_IFCHR, os.makedev(5, 1))
    shutil.copy("/bin/busybox", work / "bin" / "busybox")
    insmods = []
    for path in module_order(modules, BOOT_MODULES):
        shutil.copy(path, work / "lib" / "modules" / path.name)
        insmods.append(f"/bin/busybox insmod /lib/modules/{path.name}")
    init = work / "init"
    init.write_text(INIT.format(insmods="\n".join(insmods)))
    init.chmod(0o755)
    names = sorted(str(p.relative_to(work)) for p in work.rglob("*"))
    archive = subprocess.run(["/bin/busybox", "cpio", "-o", "-H", "newc"], cwd=work, input="\n".join(names).encode(),
                             capture_output=True)
    if archive.returncode != 0:
        raise VmImageError(f"cpio failed: {archive.stderr.decode()[-1000:]}")
    target.write_bytes(archive.stdout)


if __name__ == "__main__":
    import sys
    import time

    began = time.monotonic()
    try:
        built = ensure_image()
    except VmImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"VM node image ready in {time.monotonic() - began:.1f}s: kernel {built.release}, {built.disk}")
