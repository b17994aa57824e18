"""What emulation costs: the second node (a qemu VM under TCG, tests/cluster/vm_node.py) against the
host node, in one run (report ratios).

  python -m bench.vm_node nodes   node start -> Ready (the VM's split: boot and services, image import,
                                  kubelet to Ready), then on each node: a pod's create -> Ready, a
                                  `kubectl exec true` round trip and a CPU-bound step inside a pod
                                  (python, sha256 of 64 MB); medians of 3
  python -m bench.vm_node steps   the quick start's two-node cluster: `srun -w <node> true` through ssh
                                  to the login node, on a host worker and on the VM's, and `srun -N2`
                                  across both; medians of 5
Needs the machine to itself: no other local node (test session or `quickstart.py up`) may run.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from bench.local_node import on_a_local_node
from images.build import build_all, image_ref
from tests.cluster.local import LocalCluster
from tests.cluster.node import NODE_NAME
from tests.cluster.tools import ensure_tools
from tests.cluster.vm_node import NAME as VM_NAME
from tests.cluster.vm_node import TOLERATION

CPU_STEP = "import hashlib; hashlib.sha256(bytes(64 << 20)).hexdigest()"


def _pod(name: str, node: str, image: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                       "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": [TOLERATION],
                                "terminationGracePeriodSeconds": 0,
                                "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                                                "command": ["sleep", "infinity"]}]}})


def _timed(action) -> float:
    began = time.monotonic()
    action()
    return time.monotonic() - began


def _on(kubectl, node: str, image: str, rounds: int) -> dict:
    starts, execs, steps = [], [], []
    for i in range(rounds):
        name = f"bench-{'vm' if node == VM_NAME else 'host'}-{i}"
        starts.append(_timed(lambda: (kubectl("apply", "-f", "-", input=_pod(name, node, image)),
                                      kubectl("wait", f"pod/{name}", "--for=condition=Ready", "--timeout=900s"))))
        execs.append(_timed(lambda: kubectl("exec", name, "--", "true")))
        steps.append(_timed(lambda: kubectl("exec", name, "--", "python3", "-c", CPU_STEP)))
        kubectl("delete", "pod", name, "--wait=true", "--timeout=600s")
    return {"pod create -> Ready (s)": round(statistics.median(starts), 2),
            "exec round trip (s)": round(statistics.median(execs), 2),
            "CPU-bound step (s)": round(statistics.median(steps), 2)}


def bench(cluster: LocalCluster, rounds: int = 3) -> dict:
    from tests.kube.conftest import Kubectl

    image = image_ref("worker")
    build_all(only=["worker"])
    host_start = _timed(cluster.up)
    cluster.node.import_images([image])
    vm_start = _timed(lambda: cluster.start_vm([image]))
    kubectl = Kubectl(ensure_tools()["kubectl"], cluster.plane.kubeconfig)
    host, vm = _on(kubectl, NODE_NAME, image, rounds), _on(kubectl, VM_NAME, image, rounds)
    return {"node start -> Ready (s)": {"host (with the control plane)": round(host_start, 1),
                                        "vm": round(vm_start, 1)},
            "vm start, by phase (s from start, or a count)": {k: round(v, 1) for k, v in cluster.vm.phases.items()},
            "host": host, "vm": vm,
            "vm / host": {k: round(vm[k] / host[k], 1) for k in host}, "rounds": rounds}


def bench_steps(cluster: LocalCluster, rounds: int = 5) -> dict:
    import subprocess
    import tempfile
    from pathlib import Path

    from bench.local_node import _install_images, installed
    from tests.support.wait import until

    _install_images(cluster)
    cluster.start_vm([image_ref("worker")])
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        _, ssh = installed(cluster, "two", key, nodes=2)

        def login(command: str) -> str:
            return subprocess.run([*ssh, command], capture_output=True, text=True, check=True).stdout

        until(lambda: "2 idle" in login("sinfo -h -o '%D %t'"), 600, "both workers idle")
        runs = {"host worker": "srun -w two-worker-0 true", "vm worker": "srun -w two-emulated-0 true",
                "both (srun -N2)": "srun -N2 -w two-worker-0,two-emulated-0 true"}
        seconds = {what: round(statistics.median(_timed(lambda: login(command)) for _ in range(rounds)), 2)
                   for what, command in runs.items()}
    return {"job step through ssh, median (s)": seconds,
            "vm / host": round(seconds["vm worker"] / seconds["host worker"], 1), "rounds": rounds}


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else "nodes"
    print(json.dumps(on_a_local_node({"nodes": bench, "steps": bench_steps}[what]), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
