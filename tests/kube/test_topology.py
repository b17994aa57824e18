"""Slurm's topology from Kubernetes node labels, against the real apiserver and a real slurmctld with
three registered slurmds (two of them in network namespaces of their own, as pods on other machines):
labelled Node objects the test owns, the worker pods bound to them as the scheduler would, and the
operator's reconcile placing each Slurm node through slurmrestd. A tree: `scontrol show topology`
says what the labels say, a `--switches=1` job lands on the one leaf with room, a label change moves
a node, a reconfigure keeps every place, a node without the leaf label is named in the condition. A
block: a new label value is a new block in topology.yaml, refused by Slurm (and named) until the
controller's reconfigure, then placed; a two-node job lands in one block. No kubelet runs here
(tests/kube/test_kube_nodes.py has why that is enough)."""
from __future__ import annotations

import json
from typing import Callable

import pytest
import yaml

from soperator.kube import Kube
from soperator.node.layout import PLACE_ANNOTATION, PLACEMENT_VOLUME
from soperator.reconcile import reconcile
from soperator.render.configs import slurm_configs_name
from tests.conftest import make_cluster
from tests.kube.test_kube_nodes import TAINT, _bind, _ready
from tests.kube.test_reconcile import _body, _finish_job
from tests.kube.test_slurm_status import API, NOWHERE, connect_to, pods_of
from tests.support.rest_slurm import NAME, SPEC
from tests.support.three_nodes import BIG0, CPU0, CPU1, three_nodes
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
SPINE, LEAF = "topology.soperator.test/spine", "topology.soperator.test/leaf"
CLIQUE = "topology.soperator.test/nvlink-domain"
TREE = {"tree": {"levels": [SPINE, LEAF]}}
BLOCK = {"block": {"label": CLIQUE, "blockSizes": [2, 4]}}
HOSTS = {"soperator-test-topo-a": (CPU0, BIG0), "soperator-test-topo-b": (CPU1,)}


def _switches(slurm) -> dict[str, dict[str, str]]:
    """`scontrol show topology`, one switch per line: name -> its fields."""
    out = {}
    for line in slurm.run("scontrol", "-o", "show", "topology").splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "SwitchName" in fields:
            out[fields["SwitchName"]] = fields
    return out


def _nodes_of(switch: dict[str, str] | None, slurm) -> set[str]:
    if not switch or switch.get("Nodes", "(null)") in ("(null)", ""):
        return set()
    return set(slurm.run("scontrol", "show", "hostnames", switch["Nodes"]).split())


def _label(kubectl, host: str, **labels: str | None) -> None:
    kubectl("label", "node", host, "--overwrite", *[f"{k}={v}" if v is not None else f"{k}-" for k, v in labels.items()])


def _rendered(kubectl, namespace: str) -> str:
    return json.loads(kubectl("-n", namespace, "get", "configmap", slurm_configs_name(make_cluster(name=NAME)),
                              "-o", "json").stdout)["data"]["topology.yaml"]


def apply_cluster(kubectl, namespace: str, topology: dict | None, node_set_fields: dict | None = None) -> None:
    """The cluster of three_nodes, its workers on no kubelet, each node set with `node_set_fields` too."""
    node_sets = [{**n, "scheduling": NOWHERE, **(node_set_fields or {})} for n in SPEC["nodeSets"]]
    spec = {**SPEC, "nodeSets": node_sets, **({"topology": topology} if topology else {})}
    kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": API, "kind": "SlurmCluster", "metadata": {
        "name": NAME, "namespace": namespace}, "spec": spec}))


def start(api, kubectl, namespace: str, slurm, topology: dict | None, labels: dict[str, dict[str, str]],
          node_set_fields: dict | None = None) -> Callable[[], dict]:
    """The cluster applied and past its populate gate, the labelled Nodes made Ready, each worker pod
    bound to its Node; returns one reconcile pass, answering the conditions by type."""
    kube, connect = Kube(api), connect_to(slurm)

    def step() -> dict:
        reconcile(kube, _body(kube, namespace, NAME), connect)
        return {c["type"]: c for c in _body(kube, namespace, NAME)["status"]["conditions"]}

    apply_cluster(kubectl, namespace, topology, node_set_fields)
    for host, values in labels.items():
        kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": host, "labels": values}, "spec": {"taints": [TAINT]}}))
        _ready(kubectl, "True", host)  # or its workers would be drained as on a node not ready
    step()
    _finish_job(kubectl, namespace, f"{NAME}-populate-jail")
    step()
    until(lambda: len(pods_of(kube, namespace)) == 3, 60, "three worker pods from two StatefulSets")
    for host, pods in HOSTS.items():
        for pod in pods:
            _bind(api, namespace, pod, host)
    return step


def event_messages(kubectl, namespace: str, reason: str) -> list[str]:
    """The messages of the namespace's events with this reason, sorted."""
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    return sorted(e["message"] for e in events if e["reason"] == reason)


def _placed_events(kubectl, namespace: str) -> list[str]:
    return event_messages(kubectl, namespace, "NodePlaced")


def _places(api, namespace: str) -> dict[str, str]:
    """The place written on each worker pod that reads one (PLACE_ANNOTATION)."""
    return {name: (pod["metadata"].get("annotations") or {}).get(PLACE_ANNOTATION, "")
            for name, pod in pods_of(Kube(api), namespace).items()
            if any(v["name"] == PLACEMENT_VOLUME for v in pod["spec"]["volumes"])}


@pytest.fixture
def nodes_removed(kubectl):
    """The test's Node objects go with it."""
    yield
    for host in HOSTS:
        kubectl("delete", "node", host, "--ignore-not-found")


def test_kubernetes_node_labels_place_each_worker_in_slurms_tree(api, kubectl, crd_installed, namespace, tmp_path,
                                                                nodes_removed):
    with three_nodes(tmp_path, TREE) as slurm:
        step = start(api, kubectl, namespace, slurm, TREE, {"soperator-test-topo-a": {SPINE: "s1", LEAF: "l1"},
                                                            "soperator-test-topo-b": {SPINE: "s1", LEAF: "l2"}})
        # What the operator renders is what the sandbox's slurmctld started with (its header names the namespace).
        started = (slurm.box.work / "etc-slurm" / "topology.yaml").read_text()
        assert _rendered(kubectl, namespace).splitlines()[1:] == started.splitlines()[1:]
        topology = step()["Topology"]
        assert (topology["status"], topology["message"]) == (
            "True", f"3 registered workers placed by their Kubernetes nodes' labels (tree of {SPINE}, {LEAF})")
        switches = _switches(slurm)
        assert _nodes_of(switches.get("l1"), slurm) == {CPU0, BIG0}
        assert _nodes_of(switches.get("l2"), slurm) == {CPU1}
        assert set(switches["s1"]["Switches"].split(",")) == {"l1", "l2"}
        assert switches["_root"]["Switches"] == "s1"
        assert _placed_events(kubectl, namespace) == [
            f"{BIG0} placed at default:_root:s1:l1 (Kubernetes node soperator-test-topo-a)",
            f"{CPU0} placed at default:_root:s1:l1 (Kubernetes node soperator-test-topo-a)",
            f"{CPU1} placed at default:_root:s1:l2 (Kubernetes node soperator-test-topo-b)"]
        assert step()["Topology"]["status"] == "True" and len(_placed_events(kubectl, namespace)) == 3  # none moved
        # Each bound pod is told its place too: what a fixed node set's slurmd registers with on a kubelet.
        assert _places(api, namespace) == {BIG0: "default:_root:s1:l1", CPU0: "default:_root:s1:l1",
                                           CPU1: "default:_root:s1:l2"}

        # Two nodes on one leaf switch: a two-node job that asks for one switch lands there.
        job = slurm.run("sbatch", "--parsable", "-N2", "--switches=1", "-o", "/dev/null", "--wrap", "sleep 1").strip()
        until(lambda: slurm.job(job)["JobState"] in ("RUNNING", "COMPLETED"), 60, "the two-node job to start")
        assert set(slurm.run("scontrol", "show", "hostnames", slurm.job(job)["NodeList"]).split()) == {CPU0, BIG0}

        # A label changes: its node moves; a reconfigure (slurmctld re-reads topology.yaml) keeps every place.
        _label(kubectl, "soperator-test-topo-b", **{LEAF: "l1"})
        step()
        assert _nodes_of(_switches(slurm).get("l1"), slurm) == {CPU0, CPU1, BIG0}
        assert _places(api, namespace)[CPU1] == "default:_root:s1:l1"
        slurm.run("scontrol", "reconfigure")
        until(lambda: _nodes_of(_switches(slurm).get("l1"), slurm) == {CPU0, CPU1, BIG0}, 30,
              "the places kept across a reconfigure")
        job = slurm.run("sbatch", "--parsable", "-N3", "--switches=1", "-o", "/dev/null", "--wrap", "true").strip()
        until(lambda: slurm.job(job)["JobState"] == "COMPLETED", 60, "the three-node job on one switch")

        # A node that lacks a level's label is named, and stays where it was.
        _label(kubectl, "soperator-test-topo-b", **{LEAF: None})
        topology = step()["Topology"]
        assert (topology["status"], topology["reason"]) == ("False", "Unplaced")
        assert topology["message"] == f"{CPU1} (soperator-test-topo-b: no label {LEAF})"
        assert CPU1 in _nodes_of(_switches(slurm).get("l1"), slurm)


def test_a_new_block_label_value_is_a_new_block_once_slurmctld_reads_it(api, kubectl, crd_installed, namespace,
                                                                         tmp_path, nodes_removed):
    with three_nodes(tmp_path, BLOCK, blocks=("nvl-1",)) as slurm:
        step = start(api, kubectl, namespace, slurm, BLOCK, {"soperator-test-topo-a": {CLIQUE: "nvl-1"},
                                                             "soperator-test-topo-b": {CLIQUE: "nvl-2"}})
        topology = step()["Topology"]
        # slurmctld still runs on the files from before nvl-2: it refuses that block, by name.
        assert (topology["status"], topology["reason"]) == ("False", "Unplaced")
        assert topology["message"].startswith(f"{CPU1} (Slurm refused default:nvl-2: "), topology["message"]
        rendered = _rendered(kubectl, namespace)
        assert '      - block: "nvl-1"\n      - block: "nvl-2"\n' in rendered
        # The controller pod's watch, here by hand: the files as the ConfigMap has them, then a reconfigure.
        (slurm.box.work / "etc-slurm" / "topology.yaml").write_text(rendered)
        slurm.run("scontrol", "reconfigure")
        until(lambda: step()["Topology"]["status"] == "True", 30, "the new block's node placed")
        blocks = {f["BlockName"]: f for f in (dict(x.split("=", 1) for x in line.split() if "=" in x)
                                              for line in slurm.run("scontrol", "-o", "show", "topology").splitlines())
                  if "BlockName" in f}
        assert _nodes_of(blocks["nvl-1"], slurm) == {CPU0, BIG0} and _nodes_of(blocks["nvl-2"], slurm) == {CPU1}
        # Block placement: a two-node job fits in one block, and takes one.
        job = slurm.run("sbatch", "--parsable", "-N2", "-o", "/dev/null", "--wrap", "sleep 1").strip()
        until(lambda: slurm.job(job)["JobState"] in ("RUNNING", "COMPLETED"), 60, "the two-node job to start")
        assert set(slurm.run("scontrol", "show", "hostnames", slurm.job(job)["NodeList"]).split()) == {CPU0, BIG0}
