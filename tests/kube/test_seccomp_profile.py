"""The Pyxis workers' seccomp profile on the real kubelet and containerd: a worker pod named to it
starts with it, and it allows nothing that the runtime's default refuses a plain worker (the same
capabilities), but enroot's pivot_root. Both profiles are read where runc takes them, in each
container's OCI config."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from soperator.api.spec import NodeSetSpec
from soperator.render.seccomp_profile import ENROOT_NEEDS, pyxis_worker_profile, pyxis_worker_profile_path
from soperator.render.worker import worker_security_context
from tests.cluster.node import PAUSE_IMAGE
from tests.conftest import make_cluster
from tests.support.wait import until

pytestmark = pytest.mark.kube


@pytest.fixture
def installed_profile(node):
    """As the operator chart's DaemonSet puts it: under the kubelet's seccomp directory."""
    directory = node.workdir / "kubelet" / "seccomp"
    path = directory / pyxis_worker_profile_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(pyxis_worker_profile()))
    yield path
    shutil.rmtree(directory)


def _pod(name: str, pyxis: bool) -> dict:
    node_set = NodeSetSpec.model_validate({"name": "w", "pyxis": {"enabled": pyxis}})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "terminationGracePeriodSeconds": 0, "containers": [{
            "name": "slurmd", "image": PAUSE_IMAGE, "imagePullPolicy": "Never",
            "securityContext": worker_security_context(make_cluster(), node_set)}]}}


def _oci_seccomp(node, kubectl, namespace: str, pod: str) -> dict:
    def started() -> str:
        status = json.loads(kubectl("-n", namespace, "get", "pod", pod, "-o", "json").stdout).get("status", {})
        running = [c for c in status.get("containerStatuses", []) if "running" in c.get("state", {})]
        return running[0]["containerID"].removeprefix("containerd://") if running else ""

    until(started, 120, f"pod {pod} running")
    config = Path(node.workdir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", started(),
                  "config.json")
    return json.loads(config.read_text())["linux"]["seccomp"]


def _allowed(profile: dict) -> tuple[set[str], dict[str, set]]:
    """(names allowed whatever their arguments, {name: the argument conditions it is allowed under})."""
    always, when = set(), {}
    for rule in profile["syscalls"]:
        if rule["action"] != "SCMP_ACT_ALLOW":
            continue
        if rule.get("args"):
            for name in rule["names"]:
                when.setdefault(name, set()).add(json.dumps(rule["args"], sort_keys=True))
        else:
            always |= set(rule["names"])
    return always, when


def test_the_pyxis_profile_is_the_runtime_default_plus_pivot_root(node, kubectl, namespace, installed_profile):
    for name, pyxis in (("plain", False), ("pyxis", True)):
        kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(_pod(name, pyxis)))
    default, ours = (_oci_seccomp(node, kubectl, namespace, pod) for pod in ("plain", "pyxis"))
    # containerd took our file as it is: the worker pod runs under it.
    assert ours["syscalls"] == pyxis_worker_profile()["syscalls"]
    assert ours["defaultErrnoRet"] == pyxis_worker_profile()["defaultErrnoRet"] == 38  # ENOSYS
    assert ours["defaultAction"] == default["defaultAction"] == "SCMP_ACT_ERRNO"
    default_always, default_when = _allowed(default)
    ours_always, ours_when = _allowed(ours)
    assert ours_always - default_always == set(ENROOT_NEEDS)
    for name, conditions in ours_when.items():
        assert name in default_always or conditions <= default_when.get(name, set()), name
    assert set(ours["architectures"]) - {"SCMP_ARCH_AARCH64"} <= set(default["architectures"])
