"""An autoscaling node set under a topology, on the real slurmctld (26.05) with the rendered files:
its powered-down records have no pod, so no Kubernetes node to be placed by. topology.yaml keeps them
under a unit of their own (`_unplaced`) so that a multi-node job is accepted and powers them up
(Slurm refuses one over nodes in no unit at submission); the place the operator sets once a pod runs
(through its REST client) is what Slurm schedules by, and a reconfigure puts a powered-down record
back under `_unplaced`."""
from __future__ import annotations

import pytest

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.node.placement import registration_conf
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from soperator.slurm import SlurmRestClient, mint_token
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox
from tests.support.wait import until

pytestmark = pytest.mark.slurm
SLURM = {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
         "extra": {"SchedulerParameters": "batch_sched_delay=0"}}
TOPOLOGIES = {"tree": ({"tree": {"levels": ["example.com/spine", "example.com/leaf"]}}, "default:_root:s1:l1"),
              "block": ({"block": {"label": "example.com/nvl", "blockSizes": [2]}}, "default:nvl-1")}


def _units(box: SlurmSandbox) -> dict[str, str]:
    """`scontrol show topology`: each leaf switch's or block's hostlist of nodes."""
    out = {}
    for line in box.run("scontrol", "-o", "show", "topology").stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        name = fields.get("BlockName") or (fields.get("SwitchName") if fields.get("Level") == "0" else None)
        if name:
            out[name] = fields.get("Nodes", "")
    return out


@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
def test_powered_down_records_wait_under_their_own_unit_and_take_the_place_the_operator_sets(tmp_path, kind):
    topology, place = TOPOLOGIES[kind]
    cluster = make_cluster(name="as", nodeSets=[{"name": "gpu", "autoscale": {"max": 4}}], topology=topology,
                           slurmConfig=SLURM)
    key = generate_jwt_key()
    files = slurm_files(cluster, blocks=("nvl-1",) if kind == "block" else ())
    with SlurmSandbox(tmp_path / "box", files, controller_host(cluster), generate_munge_key(), cloud=True, jwt_key=key,
                      rest=True) as box:
        assert box.status["ready"], (box.status, box.log("slurmctld.log"))
        assert _units(box)["_unplaced"] == "as-gpu-[0-3]"
        # Accepted while every record is powered down, and two of them powered up for it.
        job = box.run("sbatch", "--parsable", "-N2", "--switches=1", "-o", "/dev/null", "--wrap", "true")
        assert job.returncode == 0, job.stderr
        until(lambda: box.run("squeue", "-h", "-j", job.stdout.strip(), "-o", "%T").stdout.strip() == "CONFIGURING",
              30, "the job to be given two records")
        box.run("scancel", job.stdout.strip())

        forwarder = RestForwarder(str(SlurmSandbox.rest_socket(tmp_path / "box")))
        try:
            client = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0)
            for name in ("as-gpu-0", "as-gpu-1"):
                client.set_topology(name, place)
            assert {n.name: n.topology for n in client.list_nodes()}["as-gpu-0"] == place
        finally:
            forwarder.close()
        units = _units(box)
        assert units["_unplaced"] == "as-gpu-[2-3]" and units[place.rsplit(":", 1)[1]] == "as-gpu-[0-1]"
        # A job for two nodes of one unit gets a pair of one unit, never one of each.
        job = box.run("sbatch", "--parsable", "-N2", "--switches=1", "-o", "/dev/null", "--wrap", "true").stdout.strip()
        nodes = until(lambda: box.run("squeue", "-h", "-j", job, "-o", "%N").stdout.strip(), 30, "the job's nodes")
        assert nodes in ("as-gpu-[0-1]", "as-gpu-[2-3]"), nodes
        box.run("scancel", job)
        if kind == "tree":
            # No leaf has three: one switch for three nodes waits (as long as it is willing to).
            job = box.run("sbatch", "--parsable", "-N3", "--switches=1@10:00", "-o", "/dev/null", "--wrap",
                          "true").stdout.strip()
            until(lambda: box.run("squeue", "-h", "-j", job, "-o", "%T|%r").stdout.strip() != "PENDING|None", 30,
                  "the scheduler's look at it")
            assert box.run("squeue", "-h", "-j", job, "-o", "%T|%r").stdout.strip() == "PENDING|Resources"
            box.run("scancel", job)
        box.run("scontrol", "update", "nodename=as-gpu-[0-1]", "state=power_down_force")
        until(lambda: "~" in box.run("sinfo", "-h", "-n", "as-gpu-0", "-o", "%t").stdout, 60, "powered down")
        box.run("scontrol", "reconfigure")
        until(lambda: _units(box).get("_unplaced") == "as-gpu-[0-3]", 30, "the records back under _unplaced")


@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
def test_a_dynamic_node_registers_at_the_place_written_on_its_pod(tmp_path, kind):
    """The worker's registration (roles.worker): the node set's --conf and the place the operator wrote
    on the pod. Slurm has the node there from its first registration, before any REST call."""
    topology, place = TOPOLOGIES[kind]
    cluster = make_cluster(name="dyn", nodeSets=[{"name": "cpu", "replicas": 1}], topology=topology, slurmConfig=SLURM)
    files = slurm_files(cluster, blocks=("nvl-1",) if kind == "block" else ())
    conf = registration_conf(worker_node_conf(cluster.spec.node_sets[0]), place)
    with SlurmSandbox(tmp_path / "box", files, controller_host(cluster), generate_munge_key(), names=["dyn-cpu-0"],
                      slurmd="dyn-cpu-0", node_conf=conf) as box:
        assert box.status["ready"], (box.status, box.log("slurmctld.log"), box.log("slurmd.log"))
        # No slurmrestd runs here: the place can only have come with the registration.
        until(lambda: _units(box).get(place.rsplit(":", 1)[1]) == "dyn-cpu-0", 30, "the node in its unit")
