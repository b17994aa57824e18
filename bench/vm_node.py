"""What emulation costs: the second node (a qemu VM under TCG, tests/cluster/vm_node.py) against the
host node, in one run (report ratios).

  python -m bench.vm_node     node start -> Ready (the VM's split: boot and services, image import,
                              kubelet to Ready), then on each node: a pod's create -> Ready (median of
                              3), a `kubectl exec true` round trip and a CPU-bound step inside a pod
                              (python, sha256 of 64 MB; median of 3)
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


def main() -> int:
    print(json.dumps(on_a_local_node(bench), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
