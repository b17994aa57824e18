"""The test node is a real Kubernetes node: kubelet, containerd, kube-proxy and CoreDNS as a user's
cluster has them (tests/cluster/node.py), at the releases users run (Kubernetes 1.37, containerd 2).
Pods from our own images run, resolve each other through cluster DNS, reach the apiserver through the
`kubernetes` Service and are reached through a NodePort; a pod may have a user namespace of its own."""
from __future__ import annotations

import json
import urllib.request

import pytest
import yaml

from soperator.kube import Kube
from tests.cluster.build import CONTAINERD, RUNTIME, kubernetes_version, required_version
from tests.cluster.node import NODE_IP, NODE_NAME
from tests.support.kube_report import namespace_report, node_lines

pytestmark = pytest.mark.kube

# A pod's record appears once CoreDNS's watch sees its endpoint, a moment after the pod turns ready:
# "no such name" is retried for up to 30 s, as a client would. A temporary failure (EAI_AGAIN,
# SERVFAIL) is never retried: the node's DNS answers every name, NXDOMAIN outside the cluster.
PROBE = """
import json, socket, ssl, time, urllib.request
def resolve(name):
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.gethostbyname(name)
        except socket.gaierror as exc:
            if exc.errno != socket.EAI_NONAME or time.monotonic() > deadline:
                raise
            time.sleep(1)
names = {n: resolve(n) for n in ("web-1.web", "web.NAMESPACE.svc.cluster.local", "kubernetes.default")}
try:
    outside = socket.gethostbyname("no-such-host.example")
except socket.gaierror as exc:
    outside = exc.errno == socket.EAI_NONAME
ctx = ssl.create_default_context(cafile="/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
with urllib.request.urlopen("https://kubernetes.default.svc/version", context=ctx) as resp:
    version = json.load(resp)["gitVersion"]
print(json.dumps({"names": names, "version": version, "outside_is_no_such_name": outside}))
"""


def _manifests(namespace: str, image: str) -> str:
    pod = {"containers": [{"name": "web", "image": image, "imagePullPolicy": "Never",
                           "command": ["python3", "-m", "http.server", "8080"],
                           "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}]}
    docs = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": namespace},
         "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 8080}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-np", "namespace": namespace},
         "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": namespace},
         "spec": {"serviceName": "web", "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod}}},
    ]
    return yaml.safe_dump_all(docs)


def test_node_is_ready_with_the_control_planes_release(node, kubectl):
    info = json.loads(kubectl("get", "node", NODE_NAME, "-o", "json").stdout)
    ready = {c["type"]: c["status"] for c in info["status"]["conditions"]}["Ready"]
    assert ready == "True"
    assert info["status"]["nodeInfo"]["kubeletVersion"] == kubernetes_version()
    containerd = required_version(CONTAINERD, RUNTIME).removeprefix("v")
    assert info["status"]["nodeInfo"]["containerRuntimeVersion"] == f"containerd://{containerd}"
    assert {"type": "InternalIP", "address": NODE_IP} in info["status"]["addresses"]
    # What a timed-out pod's report says of the node: here, nothing amiss (no pressure, no taint).
    assert node_lines({"items": [info]}) == [f"node {NODE_NAME}: unhealthy conditions none, taints none"]


def test_pods_resolve_each_other_reach_the_apiserver_and_a_nodeport(node, node_image, kubectl, namespace, api):
    kubectl("apply", "-f", "-", input=_manifests(namespace, node_image))
    # Within kubectl's own 120 s: an answer, not a TimeoutExpired.
    rollout = kubectl("-n", namespace, "rollout", "status", "statefulset/web", "--timeout=100s", check=False)
    # Why not, when not (once seen in CI, not here): the pods, their events, their logs.
    assert rollout.returncode == 0, f"{rollout.stderr}\n{namespace_report(kubectl, namespace)}"
    out = kubectl("-n", namespace, "exec", "web-0", "--", "python3", "-c", PROBE.replace("NAMESPACE", namespace)).stdout
    seen = json.loads(out)
    pods = {p["metadata"]["name"]: p["status"]["podIP"] for p in
            json.loads(kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]}
    assert seen["names"]["web-1.web"] == pods["web-1"]  # a StatefulSet pod by name, through CoreDNS
    assert seen["names"][f"web.{namespace}.svc.cluster.local"] in pods.values()
    assert seen["version"] == kubernetes_version()  # through the Service and kube-proxy
    assert seen["outside_is_no_such_name"] is True  # NXDOMAIN, not SERVFAIL, as a real resolver says
    service = json.loads(kubectl("-n", namespace, "get", "service", "web-np", "-o", "json").stdout)
    port = service["spec"]["ports"][0]["nodePort"]
    with urllib.request.urlopen(f"http://{NODE_IP}:{port}/", timeout=10) as resp:
        assert resp.status == 200
    # Logs come from the kubelet too: the request above is in one pod's log, as kubectl and the
    # operator's own reader (Kube.log_tail, how AccountingReady reads slurmdbd) get it.
    logs = "".join(kubectl("-n", namespace, "logs", pod).stdout for pod in pods)
    assert '"GET / HTTP/1.1" 200' in logs
    kube = Kube(api)
    assert '"GET / HTTP/1.1" 200' in "".join(kube.log_tail(namespace, pod, "web") for pod in pods)
    assert kube.log_tail(namespace, "no-such-pod", "web") == ""


def _host_uid(pid: int) -> int:
    status = open(f"/proc/{pid}/status").read()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def test_a_pod_without_host_users_is_root_only_inside_its_user_namespace(node, node_image, kubectl, namespace):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "userns", "namespace": namespace},
           "spec": {"hostUsers": False, "containers": [
               {"name": "main", "image": node_image, "imagePullPolicy": "Never", "command": ["sleep", "infinity"]}]}}
    kubectl("apply", "-f", "-", input=json.dumps(pod))
    kubectl("-n", namespace, "wait", "pod/userns", "--for=condition=Ready", "--timeout=120s")
    inside = kubectl("-n", namespace, "exec", "userns", "--", "sh", "-c", "id -u; cat /proc/self/uid_map").stdout.split()
    assert inside[0] == "0"
    first_inside, first_host, length = (int(v) for v in inside[1:4])
    assert first_inside == 0 and length == 65536
    assert first_host >= 65536  # the kubelet's default range starts above every id a host user has
    status = json.loads(kubectl("-n", namespace, "get", "pod", "userns", "-o", "json").stdout)["status"]
    container = status["containerStatuses"][0]["containerID"]
    assert _host_uid(node.task_pid(container)) == first_host  # the pod's root, seen from the node
