"""Quick start on kind: a Slurm cluster with a shared-root jail on your machine, in one command.

    .venv/bin/python examples/kind/quickstart.py [--cluster-name hpc] [--ssh-key ~/.ssh/id_ed25519.pub]

Needs kind with Docker (or KIND_EXPERIMENTAL_PROVIDER=podman), podman and debootstrap to build the
images (as root), kubectl, helm and ssh. Steps, each printed before it runs:
  1. create the kind cluster (kept if it exists);
  2. build the images with podman and load them into kind under the names the charts use;
  3. install the charts: slurm-operator, slurm-cluster-storage (the jail on a hostPath volume of
     the single kind node), slurm-cluster (login Service of type NodePort, your key for root);
  4. wait for the operator rollout and for the SlurmCluster phase Ready;
  5. ssh to the login node through `kubectl port-forward` and sbatch a job that runs in the jail.
`--kubeconfig FILE` skips steps 1-2 and uses that cluster: the tests run steps 3-4 this way against
their own control plane.
"""
from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHARTS = ROOT / "charts"
HERE = Path(__file__).resolve().parent
NODE_IMAGES = ("controller", "worker", "login", "populate-jail", "operator")
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


def create_cluster(args) -> None:
    need("kind")
    existing = run("kind", "get", "clusters", capture=True).split()
    if args.kind_name in existing:
        run("kind", "export", "kubeconfig", "--name", args.kind_name, "--kubeconfig", str(args.kubeconfig))
    else:
        run("kind", "create", "cluster", "--name", args.kind_name, "--config", str(HERE / "kind-config.yaml"),
            "--kubeconfig", str(args.kubeconfig), "--wait", "180s")


def load_images(args) -> None:
    """Built and loaded as localhost/soperator/*: the fully qualified names the charts and the
    SlurmCluster default to (pullPolicy IfNotPresent: kind's node already holds them)."""
    sys.path.insert(0, str(ROOT))
    from images.build import build_all, image_ref
    from images.podman import podman

    build_all()
    with tempfile.TemporaryDirectory() as tmp:
        for name in NODE_IMAGES:
            archive = f"{tmp}/{name}.tar"
            podman("save", "--format", "docker-archive", "-o", archive, image_ref(name))
            run("kind", "load", "image-archive", archive, "--name", args.kind_name)


def install_charts(args) -> None:
    helm = ["helm", "--kubeconfig", str(args.kubeconfig), "upgrade", "--install", "-n", args.namespace]
    operator_sets = [x for kv in args.set_operator for x in ("--set", kv)]
    run(*helm, "--create-namespace", OPERATOR_RELEASE, str(CHARTS / "slurm-operator"), *operator_sets)
    name = args.cluster_name
    run(*helm, f"{name}-storage", str(CHARTS / "slurm-cluster-storage"), "--set", f"clusterName={name}",
        "--set", f"jail.size={args.jail_size}", "--set", "jail.persistentVolume.enabled=true",
        "--set", f"jail.persistentVolume.hostPath=/var/lib/soperator/{args.namespace}-{name}-jail")
    values = {"spec": {"workers": {"replicas": args.workers},
                       "login": {"service": {"type": "NodePort"},
                                 "rootSshPublicKeys": [args.ssh_key.read_text().strip()]}}}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
        json.dump(values, fh)
        fh.flush()
        run(*helm, name, str(CHARTS / "slurm-cluster"), "-f", fh.name)


def wait_ready(args) -> None:
    kubectl = ["kubectl", "--kubeconfig", str(args.kubeconfig), "-n", args.namespace]
    timeout = f"--timeout={args.timeout}s"
    run(*kubectl, "rollout", "status", f"deployment/{OPERATOR_RELEASE}-slurm-operator", timeout)
    run(*kubectl, "wait", f"slurmcluster/{args.cluster_name}", "--for=jsonpath={.status.phase}=Ready", timeout)
    run(*kubectl, "get", "slurmcluster", args.cluster_name)


def ssh_and_sbatch(args) -> None:
    need("ssh")
    port = _free_port()
    forward = subprocess.Popen(["kubectl", "--kubeconfig", str(args.kubeconfig), "-n", args.namespace,
                                "port-forward", f"service/{args.cluster_name}-login", f"{port}:22"])
    try:
        _wait_for_port(port)
        key = args.ssh_key.with_suffix("")  # the private key next to the .pub
        job = "sbatch --wait -o /root/quickstart.out --wrap 'hostname; cat /etc/soperator-jail-release'"
        run("ssh", "-p", str(port), "-i", str(key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "root@127.0.0.1", f"{job} && cat /root/quickstart.out")
    finally:
        forward.terminate()
        forward.wait(10)


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
    parser.add_argument("--kind-name", default="soperator", help="the kind cluster's name")
    parser.add_argument("--kubeconfig", type=Path,
                        help="use this cluster and skip the kind steps (default: a new kind cluster)")
    parser.add_argument("--namespace", default="slurm")
    parser.add_argument("--cluster-name", default="hpc", help="the SlurmCluster's name")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jail-size", default="8Gi")
    parser.add_argument("--ssh-key", type=Path, default=_default_key(), help="public key for root on the login node")
    parser.add_argument("--set-operator", action="append", default=[], metavar="KEY=VALUE",
                        help="a --set for the slurm-operator chart (repeatable)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds to wait for each readiness step")
    parser.add_argument("--skip-ssh", action="store_true", help="stop once the SlurmCluster is Ready")
    args = parser.parse_args(argv)
    if args.ssh_key is None or not args.ssh_key.exists():
        parser.error("no ssh public key: pass --ssh-key (or create one with ssh-keygen -t ed25519)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    steps = [install_charts, wait_ready] + ([] if args.skip_ssh else [ssh_and_sbatch])
    if args.kubeconfig is None:
        args.kubeconfig = Path.home() / ".kube" / f"kind-{args.kind_name}.yaml"
        steps = [create_cluster, load_images] + steps
    try:
        need("kubectl", "helm")
        for step in steps:
            print(f"== {step.__name__.replace('_', ' ')}", flush=True)
            started = time.monotonic()
            step(args)
            print(f"== {step.__name__.replace('_', ' ')}: done in {time.monotonic() - started:.1f}s", flush=True)
    except StepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"done: SlurmCluster {args.namespace}/{args.cluster_name} is Ready", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
