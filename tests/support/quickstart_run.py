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
