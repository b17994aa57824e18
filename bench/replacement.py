"""A worker moved off a Kubernetes node marked bad, timed phase by phase: `python -m bench.replacement`.

The quick start with `--nodes 2` (this host and the VM node, tests/cluster/vm_node.py), one node set of
one worker that may run on either (it tolerates the VM's taint) with `replaceUnhealthy`, the condition
`SoperatorBenchProblem` named in `healthCheck.kubernetesNodeConditions`, and the operator in cluster
with `replaceUnhealthyWorkers` (resync 5 s, as the tests run it). The condition is set True on the node
the worker runs on, as node-problem-detector would; the bench times, from then: the Slurm node
drained with the condition's reason, the Kubernetes node cordoned, the old pod gone, the new pod
running on the other node, its slurmd registered and the drain undone, and a job step run on it.
Then the condition is cleared and the cordon lifted. The VM is emulated (qemu without KVM): a pod
that starts there takes several times a real node's time. One run; stops and purges what it started.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import paramiko

from soperator.node.layout import CORDONED_ANNOTATION
from tests.cluster.node import NODE_IP
from tests.cluster.vm_node import TOLERATION
from tests.support.ssh_session import Login
from tests.support.wait import until
from tests.support_paths import ROOT

STATE = Path("/var/lib/soperator/bench-replacement")
QUICKSTART = [sys.executable, str(ROOT / "examples" / "quickstart.py")]
NAMESPACE, NAME = "slurm", "hpc"
WORKER = f"{NAME}-worker-0"
CONDITION = "SoperatorBenchProblem"
VALUES = {"spec": {"nodeSets": [{"name": "worker", "replicas": 1, "replaceUnhealthy": True,
                                 "scheduling": {"tolerations": [TOLERATION]}}],
                   "healthCheck": {"kubernetesNodeConditions": [CONDITION]}}}


def kubectl(*args: str, namespaced: bool = True) -> str:
    env = {**os.environ, "KUBECONFIG": str(STATE / "plane" / "admin.kubeconfig")}
    binary = Path.home() / ".cache" / "soperator" / "bin" / "kubectl"
    scope = ["-n", NAMESPACE] if namespaced else []
    return subprocess.run([str(binary), *scope, *args], env=env, check=True, capture_output=True, text=True).stdout


def _pod() -> dict | None:
    pods = json.loads(kubectl("get", "pods", "-o", "json"))["items"]
    return next((p for p in pods if p["metadata"]["name"] == WORKER), None)


def _running_elsewhere(uid: str, bad: str) -> bool:
    pod = _pod()
    return (pod is not None and pod["metadata"]["uid"] != uid and pod["spec"].get("nodeName") not in (None, bad)
            and all(c.get("ready") for c in pod["status"].get("containerStatuses") or [{}]))


def _set_condition(node: str, status: str) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    patch = {"status": {"conditions": [{"type": CONDITION, "status": status, "reason": "Bench",
                                        "message": "the bench marks this node bad", "lastHeartbeatTime": now,
                                        "lastTransitionTime": now}]}}
    kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p", json.dumps(patch),
            namespaced=False)


def _node(name: str) -> dict:
    return json.loads(kubectl("get", "node", name, "-o", "json", namespaced=False))


def _slurm(login: Login) -> tuple[str, str]:
    """The worker's state and reason as sinfo prints them."""
    out = login.run(f"sinfo -h -N -n {WORKER} -o '%t|%E'").strip().splitlines()
    return tuple(out[0].split("|", 1)) if out else ("", "")  # type: ignore[return-value]


def replace(login: Login) -> dict[str, object]:
    pod = _pod()
    bad, uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]
    # Every phase is looked for at each sweep (about 0.3 s: one ssh command and three reads): a phase
    # may last less than a sweep (the drain of an idle worker lives until its pod goes), so each one
    # is stamped when first seen, and None when never seen.
    checks = {
        "drained in Slurm": lambda: CONDITION in _slurm(login)[1],
        "node cordoned": lambda: _node(bad)["spec"].get("unschedulable") is True,
        "old pod gone": lambda: (_pod() or {}).get("metadata", {}).get("uid") != uid,
        "new pod running elsewhere": lambda: _running_elsewhere(uid, bad),
        "serving (slurmd idle, no drain)": lambda: _running_elsewhere(uid, bad) and _slurm(login) == ("idle", "none"),
    }
    seen: dict[str, float | None] = dict.fromkeys(checks)
    _set_condition(bad, "True")
    began = time.monotonic()
    while seen["serving (slurmd idle, no drain)"] is None:
        if time.monotonic() - began > 900:
            raise SystemExit(f"not served again in 900 s: {seen}")
        for phase, check in checks.items():
            if seen[phase] is None and check():
                seen[phase] = round(time.monotonic() - began, 1)
    login.run(f"srun -w {WORKER} true", timeout=300)
    phases: dict[str, object] = {"from node": bad, **seen, "a step ran on it": round(time.monotonic() - began, 1),
                                 "to node": _pod()["spec"]["nodeName"]}
    _set_condition(bad, "False")
    cleared = time.monotonic()
    until(lambda: not _node(bad)["spec"].get("unschedulable")
          and CORDONED_ANNOTATION not in (_node(bad)["metadata"].get("annotations") or {}), 300, "the cordon lifted")
    phases["condition cleared -> uncordoned"] = round(time.monotonic() - cleared, 1)
    return phases


def main() -> int:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as values:
        json.dump(VALUES, values)
    up = subprocess.run([*QUICKSTART, "up", "--nodes", "2", "--state-dir", str(STATE), "--skip-ssh",
                         "--timeout", "1800", "--values", values.name, "--set-operator", "replaceUnhealthyWorkers=true",
                         "--set-operator", "resyncSeconds=5"], cwd=ROOT)
    try:
        if up.returncode != 0:
            raise SystemExit("the quick start failed")
        port = int(kubectl("get", "service", f"{NAME}-login", "-o", "jsonpath={.spec.ports[0].nodePort}"))
        login = Login(NODE_IP, port, paramiko.Ed25519Key.from_private_key_file(str(STATE / "id_ed25519")), timeout=600)
        until(lambda: _slurm(login)[0] == "idle", 600, "the worker idle")
        phases = replace(login)
        login.close()
    finally:
        subprocess.run([*QUICKSTART, "down", "--nodes", "2", "--state-dir", str(STATE), "--purge"], cwd=ROOT)
        os.unlink(values.name)
    print(json.dumps(phases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
