"""A real Kubernetes node on this machine: containerd, kubelet, kube-proxy and CoreDNS.

Built for this host (Debian bookworm, root, no systemd, cgroup v1 hybrid layout, no Docker):
- containerd 2 and runc 1.4, built from Go modules (build.runtime_binaries; bookworm's containerd 1.6
  and runc 1.1 cannot give pods user namespaces), with Debian's CNI bridge/host-local/loopback/portmap
  plugins; every directory containerd owns lives under the node's work directory
  (templates/containerd.toml.j2);
- the kubelet with the cgroupfs driver (no systemd to delegate to), `failCgroupV1: false` (this host
  mounts cgroup v1 controllers: from Kubernetes 1.35 the kubelet refuses to start on them without
  it), no swap check, images never garbage-collected (they are imported here, nothing can pull them
  again) and eviction thresholds low enough for a shared disk. Pods may ask for `hostUsers: false`:
  the kubelet's default range (no `kubelet` entry in /etc/subuid) maps each such pod's ids to 65,536
  host ids of its own, above 65,535;
- kube-proxy in iptables mode, NodePorts on the node address only;
- CoreDNS as a host process on the node address, which the kubelet hands to pods as their DNS server.
The node address (NODE_IP) is put on `lo`: this kernel has no dummy links, and a /32 on lo is local
to the host yet routable from pods through the bridge's gateway.

Side effects on the host: `Node.stop()` removes the KUBE-* iptables chains, the bridge, mounts under
the work directory and the kubepods cgroups; `HostState.restore()` puts back the sysctls the kubelet
rewrites (values saved before it started), removes the lo address and /var/log/pods,
/var/log/containers, /var/lib/kubelet (device plugins) and /run/containerd (shim sockets), each
only if it was not there before.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import jinja2
import yaml
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.cluster.build import CACHE, ensure_binaries
from tests.cluster.controlplane import ControlPlane, free_port, http_ok
from tests.cluster.process import Component, wait_for

NODE_IP = "10.217.0.1"
POD_CIDR = "10.217.1.0/24"
BRIDGE = "soperator0"
NODE_NAME = "soperator-node"
CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "localhost/soperator/pause:1"
HERE = Path(__file__).resolve().parent
SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
# Paths the kubelet and containerd write outside their configured directories.
HOST_PATHS = (Path("/var/log/pods"), Path("/var/log/containers"), Path("/var/lib/kubelet"), Path("/run/containerd"))
COREDNS_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: soperator-local-coredns}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: soperator-local-coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: soperator-local-coredns}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: soperator-local-coredns}
"""


class NodeError(RuntimeError):
    pass


def run(*argv: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if check and proc.returncode != 0:
        raise NodeError(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc


class Node:
    """One node, registered with `plane` as NODE_NAME. `images` persist across nodes in the cache
    directory's containerd content store, so a rerun imports only what changed."""

    def __init__(self, plane: ControlPlane, workdir: Path, image_store: Path = CACHE / "containerd"):
        self.plane, self.workdir, self.image_store = plane, workdir, image_store
        self.logs = workdir / "logs"
        self.socket = workdir / "containerd" / "containerd.sock"
        self.components: list[Component] = []
        self.start_seconds = 0.0

    # --- start -----------------------------------------------------------------------------------

    def start(self, timeout: float = 120) -> "Node":
        began = time.monotonic()
        for tool in ("iptables", "ip"):
            if not shutil.which(tool):
                raise NodeError(f"{tool} not found: .ci/setup installs it (apt: iptables, iproute2)")
        if not Path("/usr/lib/cni/bridge").exists():
            raise NodeError("CNI plugins not found in /usr/lib/cni: apt install containernetworking-plugins")
        self.logs.mkdir(parents=True, exist_ok=True)
        # A pod in a user namespace (hostUsers: false) has runc prepare its root under containerd's
        # state directory as a host uid above 65,535: every directory above it must let others pass
        # (a tempfile directory is 0700), as /run does on a real node.
        for directory in (self.workdir.parent, self.workdir):
            directory.chmod(directory.stat().st_mode | 0o111)
        self._write_configs()
        self.define()
        deadline = began + timeout
        try:
            containerd, kubelet, proxy, coredns = self.components
            containerd.start()
            wait_for(containerd, lambda: self._ctr("version", check=False).returncode == 0, deadline, NodeError)
            self.import_images([], pause=True)
            self.plane_kubectl("apply", "-f", "-", input=COREDNS_RBAC)
            coredns.start()
            wait_for(coredns, lambda: http_ok(f"http://127.0.0.1:{self.ports['dns_ready']}/ready"), deadline,
                     NodeError)
            kubelet.start()
            wait_for(kubelet, self._node_ready, deadline, NodeError)
            proxy.start()
            wait_for(proxy, lambda: http_ok(f"http://127.0.0.1:{self.ports['proxy_health']}/healthz"), deadline,
                     NodeError)
        except NodeError:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def define(self) -> list[Component]:
        """The node's processes, by PID file: whether this invocation started them or an earlier one."""
        if self.components:
            return self.components
        bins, work, logs = ensure_binaries(), self.workdir, self.logs
        self.components = [
            Component("containerd", [str(bins["containerd"]), "--config", str(work / "containerd.toml")],
                      logs / "containerd.log"),
            Component("kubelet", [
                str(bins["kubelet"]), f"--config={work / 'kubelet.yaml'}", f"--kubeconfig={work / 'kubelet.kubeconfig'}",
                f"--root-dir={work / 'kubelet'}", f"--cert-dir={work / 'kubelet-pki'}", f"--node-ip={NODE_IP}",
                f"--hostname-override={NODE_NAME}", "--v=1"], logs / "kubelet.log"),
            Component("kube-proxy", [str(bins["kube-proxy"]), f"--config={work / 'kube-proxy.yaml'}", "--v=1"],
                      logs / "kube-proxy.log"),
            Component("coredns", [str(bins["coredns"]), "-conf", str(work / "Corefile")], logs / "coredns.log"),
        ]
        return self.components

    def _write_configs(self) -> None:
        work, pki = self.workdir, self.plane.pki
        self.ports = {k: free_port() for k in ("kubelet", "kubelet_health", "proxy_health", "proxy_metrics",
                                                 "dns_health", "dns_ready")}
        write_runtime_configs(work, root=self.image_store, state=work / "containerd" / "state", socket=self.socket,
                              bridge=BRIDGE, pod_cidr=POD_CIDR, ipam_dir=work / "cni-ipam")
        node_cert = pki.issue(f"system:node:{NODE_NAME}", "system:nodes", ExtendedKeyUsageOID.CLIENT_AUTH)
        serving = pki.issue(f"kubelet-serving-{NODE_NAME}", None, ExtendedKeyUsageOID.SERVER_AUTH,
                            dns=[NODE_NAME], ips=[NODE_IP])
        proxy_cert = pki.issue("system:kube-proxy", None, ExtendedKeyUsageOID.CLIENT_AUTH)
        dns_cert = pki.issue("soperator-local-coredns", None, ExtendedKeyUsageOID.CLIENT_AUTH)
        for name, (cert, key) in {"kubelet": node_cert, "kube-proxy": proxy_cert, "coredns": dns_cert}.items():
            self.plane.write_kubeconfig(work / f"{name}.kubeconfig", cert, key)
        (work / "kubelet.yaml").write_text(yaml.safe_dump(kubelet_config(
            NODE_IP, self.ports["kubelet"], serving, pki.ca_cert, self.socket, memory_reserve="100Mi",
            healthzBindAddress="127.0.0.1", healthzPort=self.ports["kubelet_health"], failCgroupV1=False,
            podLogsDir=str(work / "pod-logs"), volumePluginDir=str(work / "volume-plugins"), maxPods=50)))
        (work / "kube-proxy.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(work / "kube-proxy.kubeconfig")},
            "hostnameOverride": NODE_NAME, "mode": "iptables", "clusterCIDR": POD_CIDR,
            "nodePortAddresses": [f"{NODE_IP}/32"], "conntrack": {"maxPerCore": 0},
            "healthzBindAddress": f"127.0.0.1:{self.ports['proxy_health']}",
            "metricsBindAddress": f"127.0.0.1:{self.ports['proxy_metrics']}",
        }))
        # No upstream resolver is reachable here. A name outside the cluster gets NXDOMAIN, as the
        # internet's DNS would give the names pods try last in their search list. Without this, such
        # queries got SERVFAIL, and glibc turned a pod's lookup of a record CoreDNS had not seen yet
        # into EAI_AGAIN instead of "no such name" (CI, test_node).
        (work / "Corefile").write_text(
            f"{CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n  bind {NODE_IP}\n  errors\n"
            f"  health 127.0.0.1:{self.ports['dns_health']}\n  ready 127.0.0.1:{self.ports['dns_ready']}\n"
            f"  kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
            f"    kubeconfig {work / 'coredns.kubeconfig'} test\n    pods insecure\n  }}\n"
            f"  cache 30\n  loadbalance\n}}\n"
            f". {{\n  bind {NODE_IP}\n  errors\n  template ANY ANY {{\n    rcode NXDOMAIN\n  }}\n}}\n")
        (work / "ports.json").write_text(json.dumps(self.ports))

    def _node_ready(self) -> bool:
        return node_ready(self.plane, NODE_NAME)

    # --- images ----------------------------------------------------------------------------------

    def import_images(self, refs: list[str], pause: bool = False,
                      progress: Callable[[str], None] | None = None) -> list[str]:
        """Import podman images into containerd's k8s.io namespace; returns the refs imported (an
        image whose podman ID is already recorded as imported is skipped). `progress` is told each
        phase (save, import) with the archive's size, for a person waiting."""
        from images.podman import podman

        say = progress or (lambda note: None)

        if pause:
            self._ensure_pause_image()
            refs = [PAUSE_IMAGE, *refs]
        stamps_path = self.image_store / "imported.json"
        stamps = json.loads(stamps_path.read_text()) if stamps_path.exists() else {}
        present = set(self._ctr("images", "ls", "-q").stdout.split())
        todo = []
        for ref in refs:
            image_id = podman("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()
            if stamps.get(ref) != image_id or ref not in present:
                todo.append((ref, image_id))
        say(f"containerd holds {len(refs) - len(todo)} of the {len(refs)} images already")
        if todo:
            with tempfile.TemporaryDirectory(dir=self.workdir) as tmp:
                archive = f"{tmp}/images.tar"
                started = time.monotonic()
                say(f"saving {len(todo)} image(s) from podman: {', '.join(r.rsplit('/', 1)[-1] for r, _ in todo)}")
                podman("save", "-m", "--format", "docker-archive", "-o", archive, *[r for r, _ in todo])
                size = os.path.getsize(archive) / 2**30
                say(f"saved {size:.1f} GiB in {time.monotonic() - started:.0f} s; importing into containerd")
                started = time.monotonic()
                self._ctr("images", "import", archive, timeout=900)
                say(f"imported in {time.monotonic() - started:.0f} s")
            stamps.update(dict(todo))
            stamps_path.write_text(json.dumps(stamps, indent=1, sort_keys=True))
        return [r for r, _ in todo]

    def _ensure_pause_image(self) -> None:
        from images.podman import podman, store_lock

        if podman("image", "exists", PAUSE_IMAGE, check=False).returncode == 0:
            return
        with tempfile.TemporaryDirectory() as ctx, store_lock():
            run("gcc", "-static", "-Os", "-o", f"{ctx}/pause", str(HERE / "pause" / "pause.c"))
            Path(ctx, "Containerfile").write_text('FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n')
            podman("build", "-t", PAUSE_IMAGE, ctx)

    def _ctr(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return run(str(ensure_binaries()["ctr"]), "--address", str(self.socket), "--namespace", "k8s.io", *args,
                   check=check, timeout=timeout)

    def task_pid(self, container_id: str) -> int:
        """The host PID of a container's main process."""
        task = container_id.removeprefix("containerd://")
        rows = (line.split() for line in self._ctr("tasks", "ls").stdout.splitlines()[1:])
        return next(int(row[1]) for row in rows if row and row[0] == task)

    def kill_container(self, container_id: str) -> None:
        """SIGKILL a container's main process, as an OOM kill or a crash of it ends the container."""
        self._ctr("tasks", "kill", "-s", "SIGKILL", container_id.removeprefix("containerd://"))

    def plane_kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return plane_kubectl(self.plane, *args, input=input, check=check)

    # --- stop ------------------------------------------------------------------------------------

    def attach(self) -> bool:
        try:
            self.ports = json.loads((self.workdir / "ports.json").read_text())
        except (OSError, ValueError):
            return False
        return all(c.alive() for c in self.define()) and self._node_ready()

    def stop(self) -> None:
        """Stop every process and undo its network state, mounts and cgroups; safe to call on a
        half-started node. The address and sysctls are the host's (see HostState)."""
        containerd, kubelet, proxy, coredns = self.define()
        kubelet.stop()
        if containerd.alive():
            self._kill_containers()
        for comp in (proxy, coredns, containerd):
            comp.stop()
        if (self.workdir / "kube-proxy.yaml").exists():
            run(str(proxy.argv[0]), "--cleanup", f"--config={self.workdir / 'kube-proxy.yaml'}", check=False)
        _remove_kube_chains()
        unmount_under(self.workdir)
        unmount_under(self.image_store)
        run("ip", "link", "del", BRIDGE, check=False)
        _remove_kubepods_cgroups()

    def _kill_containers(self) -> None:
        """Containers outlive containerd (their shims keep them): end them while it still answers."""
        for task in self._ctr_ids("tasks"):
            self._ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
            for _ in range(50):
                if self._ctr("tasks", "delete", task, check=False).returncode == 0:
                    break
                time.sleep(0.1)
        for container in self._ctr_ids("containers"):
            self._ctr("containers", "delete", container, check=False)

    def _ctr_ids(self, kind: str) -> list[str]:
        return [line.split()[0] for line in self._ctr(kind, "ls", check=False).stdout.splitlines()[1:] if line]


def plane_kubectl(plane: ControlPlane, *args: str, input: str | None = None,
                  check: bool = True) -> subprocess.CompletedProcess:
    from tests.cluster.tools import ensure_tools

    return run(str(ensure_tools()["kubectl"]), "--kubeconfig", str(plane.kubeconfig), *args, input=input,
               check=check, timeout=120)


def node_ready(plane: ControlPlane, name: str) -> bool:
    proc = plane_kubectl(plane, "get", "node", name, "-o", "json", check=False)
    if proc.returncode != 0:
        return False
    conditions = json.loads(proc.stdout)["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def write_runtime_configs(work: Path, root: Path | str, state: Path | str, socket: Path | str, bridge: str,
                          pod_cidr: str, ipam_dir: Path | str) -> None:
    """A node's containerd.toml (the runtime built beside it) and its CNI network (work/cni): a bridge
    with the node's pod range, the gateway on the node, no masquerade."""
    bins = ensure_binaries()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), undefined=jinja2.StrictUndefined)
    (work / "containerd.toml").write_text(env.get_template("containerd.toml.j2").render(
        root=root, state=state, socket=socket, pause_image=PAUSE_IMAGE, shim=bins["containerd-shim-runc-v2"],
        runc=bins["runc"], cni_bin="/usr/lib/cni", cni_conf=work / "cni"))
    (work / "cni").mkdir(exist_ok=True)
    (work / "cni" / "10-soperator.conflist").write_text(json.dumps({
        "cniVersion": "0.4.0", "name": "soperator", "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(ipam_dir)}},
            {"type": "portmap", "capabilities": {"portMappings": True}}]}, indent=2))


def kubelet_config(address: str, port: int, serving: tuple[Path, Path], ca: Path, socket: Path | str,
                   memory_reserve: str, **more) -> dict:
    """What every node's kubelet here has: webhook authentication and authorization, the cgroupfs
    driver (no systemd), the cluster's DNS, images never garbage-collected (they are imported, nothing
    can pull them again) and eviction thresholds low enough for a shared disk; `more` per node."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": address, "port": port, "readOnlyPort": 0,
        "tlsCertFile": str(serving[0]), "tlsPrivateKeyFile": str(serving[1]),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca)}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{socket}",
        "cgroupDriver": "cgroupfs", "failSwapOn": False,
        "protectKernelDefaults": False, "clusterDNS": [NODE_IP], "clusterDomain": CLUSTER_DOMAIN,
        "evictionHard": {"memory.available": memory_reserve, "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "staticPodPath": "", **more,
    }


def mounts_under(top: Path) -> list[str]:
    prefix = str(top.resolve()) + "/"
    points = [line.split()[4].replace("\\040", " ") for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == prefix[:-1] or p.startswith(prefix)]


def unmount_under(top: Path) -> None:
    for point in sorted(mounts_under(top), key=len, reverse=True):
        run("umount", "-l", point, check=False)


def _has_address() -> bool:
    return f"{NODE_IP}/32" in run("ip", "-4", "addr", "show", "dev", "lo").stdout


# The kubelet's and kube-proxy's iptables chains are named KUBE-*, in these tools and tables.
IPTABLES = [(tool, table) for tool in ("iptables", "ip6tables") for table in ("filter", "nat", "mangle")]


def _kube_chains(rules: list[str]) -> list[str]:
    return [r.split()[1] for r in rules if r.startswith("-N KUBE-")]


def _remove_kube_chains() -> None:
    """The KUBE-* chains, and the jumps into them."""
    for tool, table in IPTABLES:
        rules = run(tool, "-t", table, "-S", check=False).stdout.splitlines()
        chains = _kube_chains(rules)
        for rule in rules:
            parts = rule.split()
            if parts[:1] == ["-A"] and not parts[1].startswith("KUBE-") and "KUBE-" in rule:
                run(tool, "-t", table, "-D", *parts[1:], check=False)
        for chain in chains:
            run(tool, "-t", table, "-F", chain, check=False)
        for chain in chains:
            run(tool, "-t", table, "-X", chain, check=False)


def _remove_kubepods_cgroups() -> None:
    for controller in Path("/sys/fs/cgroup").iterdir():
        top = controller / "kubepods"
        if top.is_dir():
            for cgroup in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                cgroup.rmdir()  # empty by now: every container was killed
            top.rmdir()


def host_snapshot() -> dict[str, dict]:
    """What a node changes outside its directories: the sysctls the kubelet rewrites, and whether
    the paths it writes to exist."""
    return {"sysctls": {name: Path("/proc/sys", name).read_text().strip() for name in SYSCTLS},
            "paths": {str(p): p.exists() for p in HOST_PATHS}}


class HostState:
    """The host changes a node makes outside its work directory, recorded before and undone after.
    The record also marks the node address as taken: a second node on the same host (a test session
    beside a running `quickstart.py up`) is refused with the owner's path, not left to collide."""

    OWNER = Path("/run/soperator-local-node")

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.record = workdir / "host.json"

    @classmethod
    def owner(cls) -> Path | None:
        return Path(cls.OWNER.read_text().strip()) if cls.OWNER.exists() else None

    def prepare(self) -> None:
        owner = str(self.owner() or "")
        if owner and owner != str(self.workdir):
            raise NodeError(f"another local node runs from {Path(owner).parent}: stop it first "
                            "(.venv/bin/python examples/quickstart.py down)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.record.exists():
            self.record.write_text(json.dumps({**host_snapshot(), "address": _has_address()}))
        self.OWNER.write_text(str(self.workdir))
        if not _has_address():
            run("ip", "addr", "add", f"{NODE_IP}/32", "dev", "lo")

    def restore(self) -> None:
        if self.record.exists():
            before = json.loads(self.record.read_text())
            for name, value in before["sysctls"].items():
                Path("/proc/sys", name).write_text(value)
            for path, existed in before["paths"].items():
                if not existed:
                    unmount_under(Path(path))
                    shutil.rmtree(path, ignore_errors=True)
            if not before["address"]:
                run("ip", "addr", "del", f"{NODE_IP}/32", "dev", "lo", check=False)
            self.record.unlink()
        if self.OWNER.exists() and self.OWNER.read_text().strip() == str(self.workdir):
            self.OWNER.unlink()


def host_leftovers(workdir: Path, image_store: Path = CACHE / "containerd") -> list[str]:
    """What a stopped node would have left on the host; empty when `down` undid everything."""
    found = []
    if _has_address():
        found.append(f"address {NODE_IP} on lo")
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        found.append(f"link {BRIDGE}")
    for tool, table in IPTABLES:
        chains = _kube_chains(run(tool, "-t", table, "-S", check=False).stdout.splitlines())
        found += [f"{tool} -t {table} chain {c}" for c in chains]
    found += [f"mount {point}" for top in (workdir, image_store) for point in mounts_under(top)]
    found += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob("*/kubepods")]
    if HostState.OWNER.exists():
        found.append(str(HostState.OWNER))
    return found
