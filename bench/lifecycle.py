"""The job-safe lifecycle on the real single-node Kubernetes (tests/cluster/local.py), with real
slurmd pods and the operator in cluster (resync 5 s). One run; report ratios and counts.

  python -m bench.lifecycle

- scale-in of k idle nodes, request -> pods gone, for k = 1 and 4 (node set at 5, then 5 -> 5-k);
- a rolling update (a new pod template) of a 4-node set, idle, maxUnavailable 1 vs 2: request ->
  every pod on the new template and its node idle again; wall time ratio;
- idle: the reconcile's writes and REST calls per pass (12 passes: a minute at resync 5 s) with 1 and
  with 8 registered workers; run here against the same apiserver and slurmrestd (its ClusterIP) with
  the operator's own code, counted by its clients. Must not grow with the nodes.
Needs the machine to itself: no other local node (test session or `quickstart.py up`) may run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.local_node import installed, on_a_local_node
from soperator.node.layout import NODE_SET_LABEL, PORTS
from tests.cluster.local import LocalCluster
from tests.cluster.tools import ensure_tools

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import quickstart  # noqa: E402  (examples/ is not a package)

NAME, NAMESPACE, NODE_SET = "bench", "bench", "worker"
LABEL = f"{NODE_SET_LABEL}={NODE_SET}"


class Bench:
    def __init__(self, kubeconfig: Path):
        self.kubectl = ["kubectl", "--kubeconfig", str(kubeconfig), "-n", NAMESPACE]

    def get(self, *argv: str) -> dict:
        return json.loads(subprocess.run([*self.kubectl, "get", *argv, "-o", "json"], check=True,
                                         capture_output=True, text=True).stdout)

    def sinfo(self) -> list[str]:
        """Each worker's compact state, as slurmctld says (scontrol in the controller pod)."""
        out = subprocess.run([*self.kubectl, "exec", f"{NAME}-controller-0", "-c", "slurmctld", "--", "sinfo",
                              "-h", "-N", "-o", "%N %t"], capture_output=True, text=True).stdout
        return sorted(set(out.splitlines()))

    def patch(self, **node_set) -> None:
        spec = {"nodeSets": [{"name": NODE_SET, **node_set}]}
        subprocess.run([*self.kubectl, "patch", "slurmcluster", NAME, "--type=merge", "-p",
                        json.dumps({"spec": spec})], check=True, capture_output=True)

    def pods(self) -> list[dict]:
        return self.get("pods", "-l", LABEL)["items"]

    def all_idle(self, n: int) -> bool:
        return self.sinfo() == sorted(f"{NAME}-{NODE_SET}-{i} idle" for i in range(n))

    def wait(self, done, what: str, timeout: float = 900) -> float:
        began = time.monotonic()
        while not done():
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.5)
        return time.monotonic() - began


def _scale_in(b: Bench, k: int, size: int = 5, **spec) -> float:
    b.patch(replicas=size, **spec)
    b.wait(lambda: b.all_idle(size), f"{size} idle nodes")
    b.patch(replicas=size - k, **spec)
    return b.wait(lambda: len(b.pods()) == size - k, f"scale-in to {size - k}")


def _rollout(b: Bench, max_unavailable: int, shm: str) -> float:
    b.patch(replicas=4, maxUnavailable=max_unavailable)
    b.wait(lambda: b.all_idle(4), "4 idle nodes")
    b.patch(replicas=4, maxUnavailable=max_unavailable, sharedMemorySize=shm)
    began = time.monotonic()
    sts = f"statefulset/{NAME}-{NODE_SET}"

    def updated() -> bool:
        revision = b.get(sts)["status"].get("updateRevision")
        pods = b.pods()
        return (len(pods) == 4 and all(p["metadata"]["labels"].get("controller-revision-hash") == revision
                                       for p in pods) and b.all_idle(4))
    b.wait(updated, f"the rollout with maxUnavailable {max_unavailable}")
    return time.monotonic() - began


def _idle(b: Bench, cluster: LocalCluster, workers: int, passes: int = 12) -> dict:
    import base64

    from kubernetes import client

    from soperator.kube import Kube
    from soperator.reconcile import reconcile
    from soperator.slurm import SlurmRestClient, mint_token

    b.patch(replicas=workers, maxUnavailable=2, sharedMemorySize="66Mi")  # the last rollout's template
    b.wait(lambda: b.all_idle(workers) and len(b.pods()) == workers, f"{workers} idle nodes, no other pod")
    cfg = client.Configuration()
    cfg.host, cfg.ssl_ca_cert = cluster.plane.url, str(cluster.plane.pki.ca_cert)
    cfg.cert_file, cfg.key_file = str(cluster.plane.pki.admin_cert), str(cluster.plane.pki.admin_key)
    kube = Kube(client.ApiClient(cfg))
    key = base64.b64decode(b.get("secret", f"{NAME}-jwt-key")["data"]["jwt_hs256.key"])
    rest = SlurmRestClient(f"http://{b.get('service', f'{NAME}-rest')['spec']['clusterIP']}:{PORTS.slurmrestd}",
                           lambda: mint_token(key))

    def body() -> dict:
        return kube.get("slurm.soperator.dev/v1alpha1", "SlurmCluster", NAMESPACE, NAME)
    for _ in range(3):  # settle: the in-cluster operator and this one agree on everything
        reconcile(kube, body(), lambda *_: rest)
    writes, calls = kube.writes, rest.calls
    for _ in range(passes):
        reconcile(kube, body(), lambda *_: rest)
    return {"workers": workers, "passes": passes, "writes": kube.writes - writes, "rest_calls": rest.calls - calls}


def install(cluster: LocalCluster) -> Bench:
    """The node up, our images on it, the charts installed (2 workers, resync 5 s) and ready."""
    from images.build import build_all, image_ref

    tools = ensure_tools()
    os.environ["PATH"] = f"{tools['kubectl'].parent}:{os.environ['PATH']}"
    cluster.up()
    build_all()
    cluster.node.import_images([image_ref(n) for n in quickstart.IMAGES])
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        installed(cluster, NAME, key)
    return Bench(cluster.plane.kubeconfig)


def run(cluster: LocalCluster) -> dict:
    b = install(cluster)
    out = {"scale-in, request -> pods gone (s)": {f"k={k}": round(_scale_in(b, k), 1) for k in (1, 4)}}
    one, two = _rollout(b, 1, "65Mi"), _rollout(b, 2, "66Mi")
    out["rolling update of 4 idle nodes (s)"] = {"maxUnavailable=1": round(one, 1), "maxUnavailable=2": round(two, 1),
                                                 "ratio 1/2": round(one / two, 2)}
    out["idle, per 12 passes"] = [_idle(b, cluster, n) for n in (1, 8)]
    return out


def main() -> int:
    print(json.dumps(on_a_local_node(run), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
