"""Many simulated Kubernetes nodes on the test control plane: KWOK's controller plays their kubelets.

The Node objects are real and made here; KWOK marks them Ready, keeps their leases, and moves the pods
the scheduler binds to them through their lives (Running with a pod IP, a Job's pod Succeeded, a
deleted pod gone) by its own stage files. It manages only nodes carrying LABEL, so a real kubelet on
the same control plane is never touched, and the nodes carry TAINT so that no pod lands on one unless
it tolerates it.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cluster.build import kwok_binary, kwok_stages
from tests.cluster.controlplane import ControlPlane, ControlPlaneError
from tests.cluster.process import Component, wait_for

LABEL = "soperator.dev/kwok"
TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
TOLERATION = {"key": TAINT["key"], "operator": "Equal", "value": "fake", "effect": "NoSchedule"}
# Pod addresses: not the Service range (KWOK's default CIDR is 10.0.0.0/24, which is ours) and wide
# enough for 65,000 pods.
POD_CIDR = "10.218.0.0/16"
# A lease renewed every 150 s (KWOK renews at a quarter of its duration): a thousand nodes cost 7
# writes a second, not 100. The controller-manager's grace period is raised above it (PLANE_ARGS).
LEASE_SECONDS = 600
STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
          "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml")
# The control plane's flags for a rig: nodes are not declared unreachable between lease renewals, and
# the controllers and scheduler are not held to client-go's default 20 requests a second.
PLANE_ARGS = {
    "kube-controller-manager": [f"--node-monitor-grace-period={LEASE_SECONDS + 120}s", "--kube-api-qps=500",
                                "--kube-api-burst=1000", "--concurrent-statefulset-syncs=10"],
    "kube-scheduler": ["--kube-api-qps=500", "--kube-api-burst=1000"],
    "kube-apiserver": ["--max-requests-inflight=1000", "--max-mutating-requests-inflight=500"],
}


class Kwok:
    def __init__(self, plane: ControlPlane, workdir: Path):
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "kwok.yaml"
        config.write_text(kwok_stages(STAGES))
        self.component = Component("kwok", [
            str(kwok_binary()), f"--kubeconfig={plane.kubeconfig}", f"--config={config}",
            f"--manage-nodes-with-label-selector={LABEL}=true", f"--cidr={POD_CIDR}",
            f"--node-lease-duration-seconds={LEASE_SECONDS}", "-v=WARN"], workdir / "kwok.log")

    def start(self, timeout: float = 60) -> "Kwok":
        self.component.start()
        # KWOK has no readiness endpoint without its server: this only fails a KWOK that exited at
        # once (a bad flag or config); the nodes it manages show it working (Ready).
        wait_for(self.component, lambda: True, time.monotonic() + timeout, ControlPlaneError)
        return self

    def stop(self) -> None:
        self.component.stop()


def node(name: str, labels: dict[str, str] | None = None, cpu: str = "64", memory: str = "512Gi") -> dict:
    """A Node object KWOK manages. Its capacity is what the pod specs ask for at most: KWOK's own
    default (1,000 CPUs) would hide a scheduling mistake in the rig."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {LABEL: "true", "kubernetes.io/hostname": name,
                                                  "kubernetes.io/os": "linux", **(labels or {})},
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [TAINT]},
            "status": {"capacity": capacity, "allocatable": capacity}}


def create_nodes(core_v1, nodes: list[dict], parallel: int = 8) -> None:
    """Made with a few requests in flight: one at a time, 10,000 nodes take minutes of round trips."""
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(core_v1.create_node, nodes))

