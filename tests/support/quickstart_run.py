"""The quick start's product steps (examples/quickstart.py with `--kubeconfig`: charts, the wait for
Ready, ssh + sbatch) against the test session's local cluster, as a user runs them."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support_paths import ROOT

SCRIPT = ROOT / "examples" / "quickstart.py"


def quickstart_up(local_cluster, tools, namespace: str, name: str, key_file: Path, *more: str,
                  timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{tools['kubectl'].parent}:{os.environ['PATH']}"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "up", "--kubeconfig", str(local_cluster.plane.kubeconfig),
         "--volumes-dir", str(local_cluster.volumes), "--namespace", namespace, "--cluster-name", name,
         "--ssh-key", f"{key_file}.pub", "--set-operator", "resyncSeconds=5",
         "--set-operator", f"seccompProfiles.kubeletRootDir={local_cluster.node.workdir / 'kubelet'}", *more],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def module_namespace(kubectl, name: str):
    """A module's one namespace for its one cluster (the conftest's is per test): yield from a fixture."""
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


def new_ssh_key(work: Path) -> Path:
    """A fresh key pair in `work`; the private key's path."""
    key_file = work / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_file)], check=True)
    return key_file


def quickstart_uninstall(local_cluster, tools, namespace: str, name: str) -> None:
    """The quick start's three releases, waited for."""
    subprocess.run([str(tools["helm"]), "--kubeconfig", str(local_cluster.plane.kubeconfig), "-n", namespace,
                    "uninstall", name, f"{name}-storage", "soperator", "--wait", "--timeout", "300s"], check=True,
                   capture_output=True)


def quickstart_login(local_cluster, tools, kubectl, namespace: str, name: str, key_file: Path, *more: str,
                     timeout: float = 900):
    """The quick start run to Ready (or the objects it left, in the failure), and root's ssh session on
    its login node."""
    import paramiko

    from tests.cluster.node import NODE_IP
    from tests.support.ssh_session import Login

    quickstart = quickstart_up(local_cluster, tools, namespace, name, key_file, *more, timeout=timeout)
    state = kubectl("-n", namespace, "get", "slurmcluster,pods,jobs,statefulsets,pvc", "-o", "wide").stdout
    assert quickstart.returncode == 0, f"{quickstart.stdout}\n{quickstart.stderr}\n--- objects:\n{state}"
    port = int(kubectl("-n", namespace, "get", "service", f"{name}-login", "-o",
                       "jsonpath={.spec.ports[0].nodePort}").stdout)
    return Login(NODE_IP, port, paramiko.Ed25519Key.from_private_key_file(str(key_file)), timeout=300)
