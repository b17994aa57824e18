"""The second node: a VM whose kernel mounts cgroup v2 (tests/cluster/vm_node.py), joined to the same
control plane as the host node (cgroup v1). Pods are placed on either by nodeSelector; they reach
each other, the apiserver and cluster DNS across the two kernels, and a hostPath under the cluster's
volumes (where the jail lives) is one directory on both nodes."""
from __future__ import annotations

import json
import os

import pytest

from images.build import build_all, image_ref
from tests.cluster.build import CONTAINERD, RUNTIME, kubernetes_version, required_version
from tests.cluster.node import NODE_NAME
from tests.cluster.vm_node import NAME as VM_NAME
from tests.cluster.vm_node import TOLERATION

pytestmark = pytest.mark.kube

PROBE = """
import json, socket, sys, urllib.request
peer = sys.argv[1]
with urllib.request.urlopen(f"http://{peer}:8080/marker", timeout=30) as resp:
    body = resp.read().decode()
mounts = {line.split()[1]: line.split()[2] for line in open("/proc/self/mounts")}
print(json.dumps({"cgroup": mounts["/sys/fs/cgroup"] == "cgroup2", "peer": body,
                  "api": socket.gethostbyname("kubernetes.default.svc.cluster.local")}))
"""


# The worker image: the one the VM's store holds for the two-kernel user path too, so a session imports
# one image into the emulated node, not two.
IMAGE = "worker"


@pytest.fixture(scope="module")
def vm_node(local_cluster, node):
    build_all(only=[IMAGE])
    node.import_images([image_ref(IMAGE)])
    yield local_cluster.start_vm([image_ref(IMAGE)])
    local_cluster.vm.stop()  # emulation keeps a core busy: not for the tests after these


def _pod(name: str, node_name: str, image: str, shared: str) -> dict:
    script = f"echo {name} > /srv/marker && cd /srv && exec python3 -m http.server 8080"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "across"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node_name}, "tolerations": [TOLERATION],
                     "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script],
                                     "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 2},
                                     "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]}],
                     "volumes": [{"name": "shared", "hostPath": {"path": shared, "type": "DirectoryOrCreate"}}]}}


def test_the_vm_node_runs_the_same_releases_on_another_kernel(vm_node, kubectl):
    nodes = {n["metadata"]["name"]: n["status"] for n in json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]}
    vm, host = nodes[VM_NAME]["nodeInfo"], nodes[NODE_NAME]["nodeInfo"]
    assert vm["kubeletVersion"] == host["kubeletVersion"] == kubernetes_version()
    containerd = required_version(CONTAINERD, RUNTIME).removeprefix("v")
    assert vm["containerRuntimeVersion"] == host["containerRuntimeVersion"] == f"containerd://{containerd}"
    assert vm["kernelVersion"] != host["kernelVersion"] == os.uname().release


def test_pods_on_both_nodes_share_a_directory_and_reach_each_other(vm_node, local_cluster, kubectl, namespace):
    image = image_ref(IMAGE)
    shared = local_cluster.volumes / f"across-{namespace}"
    shared.mkdir()
    (shared / "from-host").write_text("written on the host\n")
    pods = {"on-host": NODE_NAME, "on-vm": VM_NAME}
    for name, node_name in pods.items():
        kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(_pod(name, node_name, image, str(shared))))
    for name in pods:
        kubectl("-n", namespace, "wait", f"pod/{name}", "--for=condition=Ready", "--timeout=600s")
    ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in
           json.loads(kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]}

    def probe(source: str, target: str) -> dict:
        out = kubectl("-n", namespace, "exec", source, "--", "python3", "-c", PROBE, ips[target]).stdout
        return json.loads(out)

    from_vm, from_host = probe("on-vm", "on-host"), probe("on-host", "on-vm")
    assert from_vm["cgroup"] is True and from_host["cgroup"] is False  # cgroup2 on the VM's kernel only
    assert from_vm["peer"] == "on-host\n" and from_host["peer"] == "on-vm\n"  # pod to pod, both ways
    assert from_vm["api"] == from_host["api"]  # cluster DNS from both nodes
    # One directory: what the host wrote the VM's pod reads; what the VM's pod writes and gives to
    # uid 2001 the host sees, owner included.
    vm_reads = kubectl("-n", namespace, "exec", "on-vm", "--", "sh", "-c",
                       "cat /shared/from-host && echo vm > /shared/from-vm && chown 2001:2001 /shared/from-vm").stdout
    assert vm_reads == "written on the host\n"
    assert (shared / "from-vm").read_text() == "vm\n"
    assert (shared / "from-vm").stat().st_uid == 2001
