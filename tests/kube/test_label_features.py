"""Kubernetes node labels as Slurm features, against the real apiserver and a real slurmctld with
three registered slurmds (tests/support/three_nodes.py: rest-cpu-0 and rest-big-0 on one Kubernetes
node, rest-cpu-1 on another), the operator's reconcile setting each worker's features through
slurmrestd: `--constraint=key=value` lands on the worker whose Kubernetes node has that label, a label
change moves the feature, a key taken out of the spec takes its features away, and a quiet pass
writes nothing. No kubelet runs here (tests/kube/test_kube_nodes.py has why that is enough); the
test's Node objects stand for the machines."""
from __future__ import annotations

import pytest

from tests.kube.test_topology import HOSTS, _label, apply_cluster, event_messages, nodes_removed, start  # noqa: F401
from tests.support.three_nodes import BIG0, CPU0, CPU1, three_nodes
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
ZONE, TYPE = "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"
HOST_A, HOST_B = HOSTS  # CPU0 and BIG0 on A, CPU1 on B
KEYS = {"featuresFromNodeLabels": [ZONE, TYPE]}


def _features(slurm, node: str) -> set[str]:
    """The node's available features; asserts its active ones are the same."""
    fields = dict(f.split("=", 1) for f in slurm.run("scontrol", "-o", "show", "node", node).split() if "=" in f)
    assert fields["AvailableFeatures"] == fields["ActiveFeatures"], fields
    return set(fields["AvailableFeatures"].split(","))


def _events(kubectl, namespace: str) -> list[str]:
    return event_messages(kubectl, namespace, "NodeFeatures")


def _lands_on(slurm, constraint: str, nodes: int = 1) -> set[str]:
    job = slurm.run("sbatch", "--parsable", f"-N{nodes}", f"--constraint={constraint}", "-o", "/dev/null",
                    "--wrap", "true").strip()
    until(lambda: slurm.job(job)["JobState"] == "COMPLETED", 60, f"the job asking for {constraint}")
    return set(slurm.run("scontrol", "show", "hostnames", slurm.job(job)["NodeList"]).split())


def test_kubernetes_node_labels_become_features_jobs_constrain_on(api, kubectl, crd_installed, namespace, tmp_path,
                                                                   nodes_removed):
    with three_nodes(tmp_path, None) as slurm:
        step = start(api, kubectl, namespace, slurm, None, {HOST_A: {ZONE: "z1", TYPE: "m5.large"}, HOST_B: {ZONE: "z2"}},
                     KEYS)
        condition = step()["NodeLabelFeatures"]
        assert (condition["status"], condition["reason"]) == ("True", "Set")
        # Beside each node set's own features (cpu's name and its `ib`).
        assert _features(slurm, CPU0) == {"cpu", "ib", f"{ZONE}=z1", f"{TYPE}=m5.large"}
        assert _features(slurm, BIG0) == {"big", f"{ZONE}=z1", f"{TYPE}=m5.large"}
        assert _features(slurm, CPU1) == {"cpu", "ib", f"{ZONE}=z2"}  # B has no instance-type label
        assert len(_events(kubectl, namespace)) == 3
        step()
        assert len(_events(kubectl, namespace)) == 3  # a quiet pass sets nothing

        assert _lands_on(slurm, f"{ZONE}=z2") == {CPU1}
        assert _lands_on(slurm, f"{ZONE}=z1&{TYPE}=m5.large", nodes=2) == {CPU0, BIG0}

        # The label changes (as when the pod moves to another node): its feature follows.
        _label(kubectl, HOST_B, **{ZONE: "z3"})
        step()
        assert _features(slurm, CPU1) == {"cpu", "ib", f"{ZONE}=z3"}
        assert _lands_on(slurm, f"{ZONE}=z3") == {CPU1}
        assert f"{CPU1} features cpu,ib,{ZONE}=z3" in _events(kubectl, namespace)

        # A key taken out of the spec: its features go, the others stay.
        apply_cluster(kubectl, namespace, None, {"featuresFromNodeLabels": [ZONE]})
        step()
        assert _features(slurm, CPU0) == {"cpu", "ib", f"{ZONE}=z1"}
        assert _features(slurm, BIG0) == {"big", f"{ZONE}=z1"}
        assert _features(slurm, CPU1) == {"cpu", "ib", f"{ZONE}=z3"}
