"""The rendered pods against the real apiserver's PodSecurity admission at the "baseline" level: the
controller and populate-jail pods pass as they are; the worker and login pods break it only where the
design needs to (docs/security.md: CAP_SYS_ADMIN to enter the jail, AppArmor off so that mount works),
and a node set with Pyxis no more than they do: its seccomp profile (the runtime's default plus enroot's
pivot_root) is a Localhost one, which baseline allows."""
from __future__ import annotations

import json
import re

import pytest

from soperator.keys import generate_munge_key, generate_ssh_host_keys
from soperator.render import KeyMaterial, render_all
from soperator.render.populate_jail import populate_jail_job
from tests.conftest import make_cluster

pytestmark = pytest.mark.kube

# What each node pod may violate, and why (docs/security.md's list of exceptions).
EXCEPTIONS = {
    "worker": {"non-default capabilities": "CAP_SYS_ADMIN: unshare + move the jail over / per step, bind mounts; "
                                           "CAP_SYS_NICE: task/affinity binds users' tasks",
               "forbidden AppArmor profile": "the default AppArmor profile denies mount whatever the capabilities"},
    # A node set with Pyxis (spec.nodeSets[].pyxis): the same; Unconfined, which it may ask for, is not.
    "worker-pyxis": {"non-default capabilities": "CAP_SYS_ADMIN, as every worker",
                     "forbidden AppArmor profile": "as every worker"},
    "login": {"non-default capabilities": "CAP_SYS_ADMIN: bind mounts into the jail before sshd chroots",
              "forbidden AppArmor profile": "the default AppArmor profile denies mount whatever the capabilities"},
}


@pytest.fixture(scope="module")
def baseline_namespace(kubectl):
    kubectl("create", "namespace", "pss-baseline")
    kubectl("label", "namespace", "pss-baseline", "pod-security.kubernetes.io/enforce=baseline")
    yield "pss-baseline"
    kubectl("delete", "namespace", "pss-baseline", "--wait=false")


def _pods() -> dict[str, dict]:
    cluster = make_cluster(name="pss", nodeSets=[{"name": "worker"}, {"name": "box", "pyxis": {"enabled": True}}])
    objects = render_all(cluster, KeyMaterial(generate_munge_key(), generate_ssh_host_keys()))
    hold = populate_jail_job(make_cluster(name="pss", populateJail={"overwrite": True}), hold_nodes=True)
    hold["metadata"]["labels"]["app.kubernetes.io/component"] = "populate-jail-holding-nodes"
    objects.append(hold)
    pods = {}
    for obj in objects:
        if obj["kind"] in ("StatefulSet", "Job"):
            component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            if obj["metadata"]["name"] == "pss-box":
                component = "worker-pyxis"
            spec = dict(obj["spec"]["template"]["spec"])
            # A StatefulSet's claim templates become PVC volumes in its pods; any volume source will do.
            spec["volumes"] = spec.get("volumes", []) + [
                {"name": c["metadata"]["name"], "emptyDir": {}} for c in obj["spec"].get("volumeClaimTemplates", [])]
            pods[component] = {"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": f"pss-{component}", "namespace": "pss-baseline"}, "spec": spec}
    return pods


def _violations(kubectl, pod: dict) -> set[str]:
    proc = kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
    if proc.returncode == 0:
        return set()
    assert 'violates PodSecurity "baseline' in proc.stderr, proc.stderr
    # '… violates PodSecurity "baseline:latest": forbidden AppArmor profiles (…), non-default capabilities (…)'
    reasons = re.sub(r"\([^)]*\)", "", proc.stderr.split('"baseline:latest": ', 1)[1])
    return {part.strip() for part in reasons.split(",") if part.strip()}


def test_pods_pass_baseline_but_for_the_listed_exceptions(kubectl, baseline_namespace):
    pods = _pods()
    assert set(pods) >= {"controller", "worker", "worker-pyxis", "login", "populate-jail", "populate-jail-holding-nodes"}
    for component, pod in sorted(pods.items()):
        assert _violations(kubectl, pod) == set(EXCEPTIONS.get(component, {})), component
