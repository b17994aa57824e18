"""Quick start: a Slurm cluster with a shared-root jail on this machine, in one command.

    .venv/bin/python examples/quickstart.py up   [--ssh-key ~/.ssh/id_ed25519.pub] [--workers 2]
    (no key of yours: one is made in the state directory, and the printed ssh command uses it)
    .venv/bin/python examples/quickstart.py down [--purge]

`up` on this machine (the default, `--on local`; root, Debian, no Docker needed): a real single-node
Kubernetes (control plane, containerd, kubelet, kube-proxy, CoreDNS: tests/cluster/local.py, the same
code the test suite runs on) comes up, the images are built with podman and imported into its
containerd, the three charts are installed, the SlurmCluster is watched phase by phase until Ready, a
job runs through ssh + sbatch, and the ssh command for the login node is printed. A second `up`
reuses whatever is there. `down` stops every process it started, by PID, and undoes its network
state and mounts; the jail's data (a hostPath under the state directory) stays unless `--purge`.

`--on kind` does the same on a kind cluster (Docker, or KIND_EXPERIMENTAL_PROVIDER=podman).
`--kubeconfig FILE` uses an existing cluster whose node already has the images.
`--nodes 2` adds a second node, a virtual machine whose kernel mounts cgroup v2 (emulated: qemu without
KVM, so everything on it is several times slower; tests/cluster/vm_node.py), and places one more node
set, `emulated`, on it: jobs span two kernels, and both nodes see the one jail.
`--slurm-version 24.11` starts the cluster on the release clusters upgrade from (its images are built
and imported too); raising `spec.slurmVersion` afterwards upgrades it in place. `--accounting` gives
it slurmdbd and MariaDB on a kept hostPath volume.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CHARTS = ROOT / "charts"
IMAGES = ("controller", "worker", "login", "populate-jail", "operator", "database")
OPERATOR_RELEASE = "soperator"


class StepError(RuntimeError):
    pass


def run(*argv: str, capture: bool = False) -> str:
    print("+", " ".join(argv), flush=True)
    proc = subprocess.run(argv, text=True, capture_output=capture)
    if proc.returncode != 0:
        raise StepError(f"`{' '.join(argv[:4])} ...` exited {proc.returncode}{': ' + proc.stderr if capture else ''}")
    return proc.stdout if capture else ""


def need(*tools: str) -> None:
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        raise StepError(f"not found on PATH: {', '.join(missing)} (see the docstring of {Path(__file__).name})")


# --- the cluster: local node or kind ----------------------------------------------------------------

def local_cluster(args):
    from tests.cluster.local import LocalCluster

    return LocalCluster(args.state_dir)


def start_local_node(args) -> None:
    from tests.cluster.tools import ensure_tools

    tools = ensure_tools()
    os.environ["PATH"] = f"{tools['kubectl'].parent}:{os.environ['PATH']}"
    cluster = local_cluster(args).up()
    args.kubeconfig = cluster.plane.kubeconfig
    # The node's kubelet keeps its files under the cluster's state directory, not /var/lib/kubelet.
    args.set_operator.append(f"seccompProfiles.kubeletRootDir={cluster.node.workdir / 'kubelet'}")
    args.volumes_dir = cluster.volumes
    print(f"  node {cluster.node.plane.address} Ready; kubeconfig {args.kubeconfig}", flush=True)


def start_vm_node(args) -> None:
    """The second node, with the worker image imported into its own containerd, and the operator's
    when the operator chart runs its cgroup delegate on every node."""
    from images.build import SLURM_RELEASE, image_ref
    from tests.cluster.vm_node import NAME

    images = [image_ref("worker", args.slurm_version or SLURM_RELEASE)]
    if operator_setting(args.set_operator, "cgroupDelegate.enabled").lower() == "true":
        images.append(image_ref("operator"))
    vm = local_cluster(args).start_vm(images)
    phases = ", ".join(f"{k} {v:.0f}" for k, v in vm.phases.items())
    print(f"  node {NAME} Ready (seconds from start, or a count: {phases})", flush=True)


def operator_setting(sets: list[str], key: str) -> str:
    """What `--set-operator` gives `key` last, as helm reads `--set` (pairs split at commas); "" if
    nothing."""
    found = ""
    for pair in (p for given in sets for p in given.split(",")):
        name, _, value = pair.partition("=")
        if name.strip() == key:
            found = value.strip()
    return found


def _say(note: str) -> None:
    print(f"  {note}", flush=True)


def image_refs(args) -> list[str]:
    """Every image of the default release, and the Slurm images of the one asked for if another."""
    from images.build import SLURM_RELEASE, build_all, image_ref

    build_all(progress=_say)
    refs = [image_ref(name) for name in IMAGES]
    if args.slurm_version not in (None, SLURM_RELEASE):
        slurm_images = [name for name in IMAGES if name != "operator"]
        build_all(only=slurm_images, progress=_say, release=args.slurm_version)
        refs += [image_ref(name, args.slurm_version) for name in slurm_images]
    return refs


def import_local_images(args) -> None:
    imported = local_cluster(args).node.import_images(image_refs(args), progress=_say)
    print(f"  imported into containerd: {', '.join(imported) or 'nothing new'}", flush=True)


def create_kind_cluster(args) -> None:
    need("kind")
    existing = run("kind", "get", "clusters", capture=True).split()
    if args.kind_name in existing:
        run("kind", "export", "kubeconfig", "--name", args.kind_name, "--kubeconfig", str(args.kubeconfig))
    else:
        run("kind", "create", "cluster", "--name", args.kind_name, "--config",
            str(ROOT / "examples" / "kind" / "kind-config.yaml"), "--kubeconfig", str(args.kubeconfig), "--wait", "180s")


def load_kind_images(args) -> None:
    """Built and loaded as localhost/soperator/*: the fully qualified names the charts and the
    SlurmCluster default to (pullPolicy IfNotPresent: kind's node already holds them)."""
    from images.podman import podman

    with tempfile.TemporaryDirectory() as tmp:
        for number, ref in enumerate(image_refs(args)):
            archive = f"{tmp}/{number}.tar"
            podman("save", "--format", "docker-archive", "-o", archive, ref)
            run("kind", "load", "image-archive", archive, "--name", args.kind_name)


# --- the product: charts, readiness, first job ------------------------------------------------------

def install_charts(args) -> None:
    helm = ["helm", "--kubeconfig", str(args.kubeconfig), "upgrade", "--install", "-n", args.namespace]
    operator_sets = [x for kv in args.set_operator for x in ("--set", kv)]
    run(*helm, "--create-namespace", OPERATOR_RELEASE, str(CHARTS / "slurm-operator"), *operator_sets)
    name, volumes = args.cluster_name, args.volumes_dir / f"{args.namespace}-{args.cluster_name}"
    # hostPath volumes on the single node: the jail every pod shares, and slurmctld's state.
    run(*helm, f"{name}-storage", str(CHARTS / "slurm-cluster-storage"), "--set", f"clusterName={name}",
        "--set", f"jail.size={args.jail_size}", "--set", "jail.persistentVolume.enabled=true",
        "--set", f"jail.persistentVolume.hostPath={volumes}-jail", "--set", "controllerSpool.enabled=true",
        "--set", "controllerSpool.persistentVolume.enabled=true",
        "--set", f"controllerSpool.persistentVolume.hostPath={volumes}-spool",
        *(("--set", "accountingDatabase.enabled=true", "--set", "accountingDatabase.persistentVolume.enabled=true",
           "--set", f"accountingDatabase.persistentVolume.hostPath={volumes}-accounting-db") if args.accounting else ()))
    values = {"spec": {"nodeSets": [{"name": "worker", "replicas": args.workers}, *_emulated_node_set(args)],
                       "controller": {"spool": {"claimName": f"{name}-controller-spool"}},
                       "login": {"service": {"type": "NodePort"},
                                 "rootSshPublicKeys": [args.ssh_key.read_text().strip()]}}}
    if args.slurm_version:
        values["spec"]["slurmVersion"] = args.slurm_version
    if args.accounting:
        values["spec"]["accounting"] = {"enabled": True, "managed": {"claimName": f"{name}-accounting-db"}}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
        json.dump(values, fh)
        fh.flush()
        run(*helm, name, str(CHARTS / "slurm-cluster"), "-f", fh.name, *(x for v in args.values for x in ("-f", str(v))))


def _emulated_node_set(args) -> list[dict]:
    """With --nodes 2: one worker on the VM node, and nothing else there (it is tainted)."""
    if args.nodes < 2:
        return []
    from tests.cluster.vm_node import NAME, TOLERATION

    return [{"name": "emulated", "replicas": 1,
             "scheduling": {"nodeSelector": {"kubernetes.io/hostname": NAME}, "tolerations": [TOLERATION]}}]


def wait_ready(args) -> None:
    """Poll the operator, the populate-jail Job, the StatefulSets and the SlurmCluster; print a line
    each time one moves, with the seconds since the wait began."""
    kubectl = ["kubectl", "--kubeconfig", str(args.kubeconfig), "-n", args.namespace]
    name, began, last = args.cluster_name, time.monotonic(), None
    args.phase_seconds = {}
    while True:
        state = _progress(kubectl, name)
        elapsed = time.monotonic() - began
        for phase, done in state.items():
            if done is True and phase not in args.phase_seconds:
                args.phase_seconds[phase] = elapsed
        line = "  ".join(f"{k}: {'ok' if v is True else v}" for k, v in state.items())
        if line != last:
            print(f"  [{elapsed:5.0f}s] {line}", flush=True)
            last = line
        if state["cluster"] is True:
            return
        if elapsed > args.timeout:
            raise StepError(f"SlurmCluster {args.namespace}/{name} not Ready after {args.timeout}s: {line}")
        time.sleep(2)


def _progress(kubectl: list[str], name: str) -> dict[str, object]:
    def get(kind: str, obj: str) -> dict:
        proc = subprocess.run([*kubectl, "get", kind, obj, "-o", "json"], capture_output=True, text=True)
        return json.loads(proc.stdout) if proc.returncode == 0 else {}

    def ready(kind: str, obj: str, want: int | None = None) -> object:
        status = get(kind, obj).get("status", {})
        have, total = status.get("readyReplicas", 0), want if want is not None else status.get("replicas", 0)
        return True if total and have >= total else f"{have}/{total}"

    job = get("job", f"{name}-populate-jail").get("status", {})
    cluster = get("slurmcluster", name).get("status", {})
    return {
        "operator": ready("deployment", f"{OPERATOR_RELEASE}-slurm-operator"),
        "jail": True if job.get("succeeded") else ("running" if job.get("active") else
                                                   "failed" if job.get("failed") else "waiting"),
        "controller": ready("statefulset", f"{name}-controller"),
        "workers": ready("statefulset", f"{name}-worker"),
        "login": ready("statefulset", f"{name}-login"),
        "cluster": True if cluster.get("phase") == "Ready" else cluster.get("phase", "Pending"),
    }


def login_address(args) -> tuple[str, int, subprocess.Popen | None]:
    """Where ssh reaches the login Service: its NodePort on the local node, or a port-forward (kind)."""
    if args.on == "local":
        from tests.cluster.node import NODE_IP

        service = json.loads(run("kubectl", "--kubeconfig", str(args.kubeconfig), "-n", args.namespace, "get",
                                 "service", f"{args.cluster_name}-login", "-o", "json", capture=True))
        return NODE_IP, service["spec"]["ports"][0]["nodePort"], None
    port = _free_port()
    forward = subprocess.Popen(["kubectl", "--kubeconfig", str(args.kubeconfig), "-n", args.namespace,
                                "port-forward", f"service/{args.cluster_name}-login", f"{port}:22"])
    _wait_for_port(port)
    return "127.0.0.1", port, forward


def ssh_and_sbatch(args) -> None:
    need("ssh")
    host, port, forward = login_address(args)
    try:
        key = args.ssh_key.with_suffix("")  # the private key next to the .pub
        job = "sbatch --wait -o /root/quickstart.out --wrap 'hostname; cat /etc/soperator-jail-release'"
        run("ssh", "-p", str(port), "-i", str(key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", f"root@{host}", f"{job} && cat /root/quickstart.out")
    finally:
        if forward is not None:
            forward.terminate()
            forward.wait(10)


def print_login(args) -> None:
    if args.on == "local":
        host, port, _ = login_address(args)
        print(f"\nLog in with:\n  ssh -i {args.ssh_key.with_suffix('')} -p {port} root@{host}\n", flush=True)
    else:
        print(f"\nLog in with: kubectl -n {args.namespace} port-forward service/{args.cluster_name}-login "
              f"2222:22, then ssh -i {args.ssh_key.with_suffix('')} -p 2222 root@127.0.0.1\n", flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise StepError(f"kubectl port-forward did not open 127.0.0.1:{port} in {timeout:.0f}s")


def _default_key() -> Path | None:
    return next((k for k in (Path.home() / ".ssh" / f"id_{t}.pub" for t in ("ed25519", "ecdsa", "rsa"))
                 if k.exists()), None)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", choices=("up", "down"), default="up")
    parser.add_argument("--on", choices=("local", "kind"), default="local", help="where the cluster runs")
    parser.add_argument("--state-dir", type=Path, default=Path("/var/lib/soperator/local"),
                        help="the local node's directory (processes' state, logs, volumes)")
    parser.add_argument("--purge", action="store_true", help="with down: also delete the jail's data")
    parser.add_argument("--kind-name", default="soperator", help="the kind cluster's name")
    parser.add_argument("--kubeconfig", type=Path, help="use this cluster, whose node has the images")
    parser.add_argument("--volumes-dir", type=Path, help="with --kubeconfig: where the node's hostPath volumes go")
    parser.add_argument("--namespace", default="slurm")
    parser.add_argument("--cluster-name", default="hpc", help="the SlurmCluster's name")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--nodes", type=int, choices=(1, 2), default=1,
                        help="2: a second node, a VM on a cgroup v2 kernel, with one worker of its own")
    parser.add_argument("--jail-size", default="8Gi")
    parser.add_argument("--ssh-key", type=Path, default=_default_key(),
                        help="public key for root on the login node (default: ~/.ssh/id_*.pub, else one made "
                             "in the state directory)")
    parser.add_argument("--set-operator", action="append", default=[], metavar="KEY=VALUE",
                        help="a --set for the slurm-operator chart (repeatable)")
    parser.add_argument("--values", type=Path, action="append", default=[], metavar="FILE",
                        help="a values file for the slurm-cluster chart, over the quick start's (repeatable; "
                             "helm replaces lists such as spec.nodeSets whole)")
    parser.add_argument("--slurm-version", choices=("24.11", "26.05"),
                        help="the Slurm release to start on (default: the chart's, 26.05)")
    parser.add_argument("--accounting", action="store_true", help="slurmdbd and MariaDB, on a kept volume")
    parser.add_argument("--timeout", type=int, default=900, help="seconds to wait for the SlurmCluster")
    parser.add_argument("--skip-ssh", action="store_true", help="stop once the SlurmCluster is Ready")
    args = parser.parse_args(argv)
    if args.command == "up" and args.ssh_key is None and args.on == "local" and args.kubeconfig is None:
        args.ssh_key = _made_key(args.state_dir)
    if args.command == "up" and (args.ssh_key is None or not args.ssh_key.exists()):
        parser.error("no ssh public key: pass --ssh-key (or create one with ssh-keygen -t ed25519)")
    return args


def _made_key(state_dir: Path) -> Path:
    """A key for root made once in the state directory, for a user who has none."""
    key = state_dir / "id_ed25519"
    if not key.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "soperator-quickstart", "-f", str(key)],
                       check=True)
    return key.with_suffix(".pub")


def steps_for(args) -> list:
    product = [install_charts, wait_ready] + ([] if args.skip_ssh else [ssh_and_sbatch]) + [print_login]
    if args.kubeconfig is not None:
        args.volumes_dir = args.volumes_dir or Path("/var/lib/soperator")
        return product
    if args.on == "kind":
        args.kubeconfig = Path.home() / ".kube" / f"kind-{args.kind_name}.yaml"
        args.volumes_dir = Path("/var/lib/soperator")  # inside the kind node
        return [create_kind_cluster, load_kind_images] + product
    vm = [start_vm_node] if args.nodes == 2 else []
    return [start_local_node, import_local_images, *vm] + product


def down(args) -> int:
    if args.on == "kind":
        run("kind", "delete", "cluster", "--name", args.kind_name)
        return 0
    local_cluster(args).down(purge=args.purge)
    kept = "" if args.purge else f"; the jail data stays in {args.state_dir / 'volumes'} (--purge removes it)"
    print(f"done: local node stopped and the host restored{kept}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "down":
            return down(args)
        steps = steps_for(args)
        if steps[0] is not start_local_node:
            need("kubectl", "helm")
        for step in steps:
            print(f"== {step.__name__.replace('_', ' ')}", flush=True)
            started = time.monotonic()
            step(args)
            print(f"== {step.__name__.replace('_', ' ')}: done in {time.monotonic() - started:.1f}s", flush=True)
    except RuntimeError as exc:  # StepError, and the local node's and image build's own errors
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"done: SlurmCluster {args.namespace}/{args.cluster_name} is Ready", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
