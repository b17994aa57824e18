"""The second node's machine: a Debian kernel that mounts cgroup v2, and a root disk, built once and
cached.

Built with no kernel installed and nothing mounted on the host: the kernel package is downloaded and
unpacked (`apt-get download` from trixie through an apt state of its own, so the host's sources are
never touched; `dpkg-deb -x`), the root file system is a debootstrap of bookworm made
into an ext4 image by `mkfs.ext4 -d`, and the initramfs (busybox, the few modules needed to reach the
disk, an init that loads them and switches to it) is written by busybox's cpio. The VM boots the disk
with qemu's `-snapshot`, so the cached image is never written. Everything the node runs (containerd,
runc, kubelet, kube-proxy) reaches it over 9p at boot, so rebuilding them never rebuilds this.
"""
from __future__ import annotations

import hashlib
import lzma
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
# The kernel comes from trixie (6.12): user-namespaced pods need idmapped tmpfs (6.3+) for their
# Secrets and /dev/shm, which bookworm's 6.1 lacks. Its modules are xz-compressed; bookworm's kmod
# reads them, busybox's insmod does not (the initramfs gets them decompressed).
KERNEL_SUITE = "trixie"
KERNEL_SOURCES = f"""\
deb [signed-by=/usr/share/keyrings/debian-archive-{KERNEL_SUITE}-stable.gpg] {MIRROR} {KERNEL_SUITE} main
deb [signed-by=/usr/share/keyrings/debian-archive-{KERNEL_SUITE}-security-automatic.gpg] \
http://deb.debian.org/debian-security {KERNEL_SUITE}-security main
"""
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


def _kernel_apt(cache: Path) -> list[str]:
    """apt options for an apt state of the kernel's suite alone, under the cache (lists fetched here)."""
    state = cache / f"apt-{KERNEL_SUITE}"
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "sources.list").write_text(KERNEL_SOURCES)
    options = {"Dir::Etc::SourceList": state / "sources.list", "Dir::Etc::SourceParts": "/dev/null",
               "Dir::State::Lists": state / "lists", "Dir::Cache": state / "cache", "Dir::State::status": "/dev/null",
               "APT::Sandbox::User": "root"}
    return [arg for key, value in options.items() for arg in ("-o", f"{key}={value}")]


def kernel_package(apt: list[str]) -> str:
    """The package `linux-image-amd64` points at today (the archive keeps only the newest)."""
    _run("apt-get", *apt, "update", timeout=600)
    out = _run("apt-cache", *apt, "depends", "linux-image-amd64")
    match = re.search(r"Depends: (linux-image-[0-9][^\s]*-amd64)", out)
    if not match:
        raise VmImageError(f"no kernel package behind linux-image-amd64: {out[:500]}")
    return match[1]


def _key(package: str) -> str:
    digest = hashlib.sha256("\n".join([package, SUITE, KERNEL_SUITE, *PACKAGES, *BOOT_MODULES, INIT, ROOT_INIT,
                                       DISK_SIZE]).encode())
    return f"{package.removeprefix('linux-image-')}-{digest.hexdigest()[:12]}"


def ensure_image(cache: Path = VM_CACHE) -> VmImage:
    cache.mkdir(parents=True, exist_ok=True)
    apt = _kernel_apt(cache)
    package = kernel_package(apt)
    release = package.removeprefix("linux-image-")
    out = cache / _key(package)
    image = VmImage(out / "vmlinuz", out / "initrd.img", out / "root.img", release)
    if image.disk.exists():
        return image
    base = _debootstrap(cache)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        kernel = _unpack_kernel(package, apt, work)
        modules = next(p for p in (kernel / "usr" / "lib" / "modules", kernel / "lib" / "modules") if p.is_dir())
        root = work / "root"
        _run("cp", "-a", str(base), str(root))
        shutil.copytree(modules, root / "usr" / "lib" / "modules", dirs_exist_ok=True)
        _run("chroot", str(root), "depmod", release)
        init = root / "usr" / "local" / "sbin" / "soperator-vm-init"
        init.write_text(ROOT_INIT)
        init.chmod(0o755)
        # The kubelet reads the machine id; each boot is the same machine, a fresh disk.
        (root / "etc" / "machine-id").write_text(hashlib.md5(b"soperator-vm-node").hexdigest() + "\n")
        staging = work / "out"
        staging.mkdir()
        shutil.copy(kernel / "boot" / f"vmlinuz-{release}", staging / "vmlinuz")
        _initramfs(modules / release, staging / "initrd.img", work / "initramfs")
        _run("mkfs.ext4", "-q", "-F", "-L", "root", "-d", str(root), str(staging / "root.img"), DISK_SIZE)
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    for old in cache.glob("*-amd64-*"):  # images of an older kernel or package list: ~1 GB each
        if old != out and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return image


def _unpack_kernel(package: str, apt: list[str], work: Path) -> Path:
    _run("apt-get", *apt, "download", package, cwd=work, timeout=1200)
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


def _module_name(path: Path) -> str:
    return path.name.split(".ko")[0].replace("-", "_")


def module_order(modules: Path, names: tuple[str, ...]) -> list[Path]:
    """The module files for `names` and what they depend on, each after its dependencies; modules
    built into the kernel are left out."""
    files = {_module_name(p): p for p in modules.rglob("*.ko*")}
    builtin_list = modules / "modules.builtin"
    builtin = {_module_name(Path(line)) for line in builtin_list.read_text().split()} if builtin_list.exists() else set()
    ordered: list[Path] = []

    def visit(name: str) -> None:
        name = name.replace("-", "_")
        if name in builtin:
            return
        path = files.get(name)
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


def _module_bytes(module: Path) -> bytes:
    return lzma.decompress(module.read_bytes()) if module.name.endswith(".xz") else module.read_bytes()


def _depends(module: Path) -> list[str]:
    match = re.search(rb"\0depends=([^\0]*)\0", _module_bytes(module))
    return [d for d in match[1].decode().split(",") if d] if match else []


def _initramfs(modules: Path, target: Path, work: Path) -> None:
    for sub in ("bin", "proc", "dev", "newroot", "lib/modules"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    os.mknod(work / "dev" / "console", 0o600 | stat.S_IFCHR, os.makedev(5, 1))
    shutil.copy("/bin/busybox", work / "bin" / "busybox")
    insmods = []
    for path in module_order(modules, BOOT_MODULES):
        name = f"{_module_name(path)}.ko"
        (work / "lib" / "modules" / name).write_bytes(_module_bytes(path))
        insmods.append(f"/bin/busybox insmod /lib/modules/{name}")
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
