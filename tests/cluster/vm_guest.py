"""PID 1 of the second node's VM (run by the disk's init, from the node's 9p share; Python 3.11).

It makes the VM a Kubernetes node as node.py makes the host one: cgroup v2 with its controllers
delegated, the modules the CNI bridge and kube-proxy need, its address and route to the host, the
host's directories it shares (the jail among them) at the same paths as on the host, then containerd,
the images the host saved for it, the kubelet and kube-proxy. Each process logs into the share; the
host reads the node's state from the apiserver. Orphans are reaped, as PID 1 must.

Standalone on purpose: the VM has Python's standard library and nothing of this repository, so it
repeats a few lines soperator.node.supervise also has (the reaping loop) rather than import them.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

SHARE = os.path.dirname(os.path.abspath(__file__))
MODULES = ("overlay", "fuse", "virtiofs", "bridge", "br_netfilter", "veth", "virtio_net", "nf_conntrack", "nf_nat", "nf_tables",
           "nft_compat", "nft_chain_nat", "xt_conntrack", "xt_comment", "xt_mark", "xt_MASQUERADE", "xt_nat",
           "xt_addrtype", "xt_statistic", "xt_multiport", "xt_tcpudp", "ipt_REJECT", "iptable_nat", "iptable_filter")
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"}


def log(message: str) -> None:
    with open(os.path.join(SHARE, "logs", "guest.log"), "a") as out:
        out.write(f"{time.monotonic():9.1f} {message}\n")


def run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")


def mount(kind: str, source: str, target: str, options: str = "") -> None:
    os.makedirs(target, exist_ok=True)
    run("mount", "-t", kind, *(["-o", options] if options else []), source, target)


def prepare(config: dict) -> None:
    # Not /tmp: the node's share may be mounted under it already (the host's path, kept).
    mount("tmpfs", "tmpfs", "/dev/shm")
    mount("devpts", "devpts", "/dev/pts", "gid=5,mode=620,ptmxmode=666")
    # As systemd mounts it on the nodes users run: a cgroup namespace's root refuses writes to its own
    # limits from inside (nsdelegate).
    mount("cgroup2", "cgroup2", "/sys/fs/cgroup", "nsdelegate,memory_recursiveprot")
    controllers = open("/sys/fs/cgroup/cgroup.controllers").read().split()
    with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as out:
        out.write(" ".join(f"+{c}" for c in controllers))
    missing = [m for m in MODULES if subprocess.run(["modprobe", m], capture_output=True).returncode != 0]
    if missing:
        log(f"modules not loaded: {' '.join(missing)}")
    # As udev's default rule makes it on the nodes users run (devtmpfs alone makes it 0600): a
    # user-namespaced worker mounts images only through the node's own, which it cannot chmod.
    os.chmod("/dev/fuse", 0o666)
    for name, value in SYSCTLS.items():
        with open(f"/proc/sys/{name}", "w") as out:
            out.write(value)
    with open("/proc/sys/kernel/hostname", "w") as out:
        out.write(config["name"])
    run("ip", "link", "set", "lo", "up")
    run("ip", "link", "set", "eth0", "up")
    run("ip", "addr", "add", config["address"], "dev", "eth0")
    run("ip", "route", "add", "default", "via", config["gateway"])
    for share in config["shares"]:
        if share["kind"] == "virtiofs":
            # virtiofs has the kernel check access itself (FUSE's default_permissions), which an
            # idmapped mount of it needs.
            mount("virtiofs", share["tag"], share["path"])
            continue
        # Read-only shares never change while the VM runs: cache them. The others are written on both
        # sides: no page cache but for mmap, so each side reads what the other wrote.
        cache = "cache=loose,ro" if share["readonly"] else "cache=mmap"
        options = f"trans=virtio,version=9p2000.L,msize=262144,{cache}"
        mount("9p", share["tag"], share["path"], options)
    log(f"prepared: cgroup2 controllers {' '.join(controllers)}")


def start(config: dict) -> dict[int, str]:
    # The image store is a disk of its own that outlives the VM (the host keeps it in its cache), so a
    # boot imports only the images that changed.
    mount("ext4", "/dev/vdb", "/var/lib/containerd")
    children = {}
    logs = os.path.join(SHARE, "logs")
    for name, argv in config["processes"]:
        out = open(os.path.join(logs, f"{name}.log"), "ab")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={"PATH": config["path"]})
        children[proc.pid] = name
        log(f"started {name} as {proc.pid}")
        if name == "containerd":
            _wait_socket(config["containerd_socket"])
            _import(config)
    return children


def _wait_socket(path: str) -> None:
    for _ in range(600):
        if os.path.exists(path):
            return
        time.sleep(0.5)
    raise RuntimeError(f"containerd never made {path}")


def _import(config: dict) -> None:
    began = time.monotonic()
    for archive in config["archives"]:
        run(config["ctr"], "--address", config["containerd_socket"], "--namespace", "k8s.io", "images", "import",
            archive)
    log(f"imported {len(config['archives'])} archive(s) in {time.monotonic() - began:.1f} s")


def main() -> None:
    config = json.load(open(os.path.join(SHARE, "config.json")))
    try:
        prepare(config)
        children = start(config)
        with open(os.path.join(SHARE, "guest.ready"), "w") as out:
            out.write(str(time.monotonic()))
    except Exception as exc:  # the host reads this; a PID 1 that exits panics the kernel
        log(f"failed: {exc}")
        with open(os.path.join(SHARE, "guest.failed"), "w") as out:
            out.write(str(exc))
        children = {}
    stop = os.path.join(SHARE, "guest.stop")
    while not os.path.exists(stop):
        reap(children)
        time.sleep(1)
    power_off(children)


def reap(children: dict[int, str]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            log(f"{children.pop(pid)} ({pid}) exited with {status}")


def power_off(children: dict[int, str]) -> None:
    """Stop the node in order and close the image store's disk cleanly, then end the machine (qemu,
    run with -no-reboot, exits)."""
    for name in ("kube-proxy", "kubelet", "containerd"):
        for pid in [p for p, n in children.items() if n == name]:
            os.kill(pid, signal.SIGTERM)
            for _ in range(300):
                reap(children)
                if pid not in children:
                    break
                time.sleep(0.1)
    os.sync()
    subprocess.run(["umount", "-l", "/var/lib/containerd"], capture_output=True)
    log("powering off")
    os.sync()
    ctypes.CDLL(None, use_errno=True).reboot(0x4321FEDC)  # LINUX_REBOOT_CMD_POWER_OFF


if __name__ == "__main__":
    sys.exit(main())
