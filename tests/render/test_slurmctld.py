"""The rendered Slurm configs are accepted by a real slurmctld (the node image's Slurm 26.05), and a
worker registers as the worker pods do: a dynamic node, configless."""
import pytest

from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.conftest import make_cluster
from tests.support.slurm import run_controller

pytestmark = pytest.mark.slurm


def test_rendered_config_brings_slurmctld_up_and_a_worker_registers_itself(tmp_path, keys):
    cluster = make_cluster(
        partitions=[{"name": "cpu", "default": True}, {"name": "debug", "maxTime": "01:00:00"},
                    {"name": "quick", "nodeSets": ["fast"]}, {"name": "big", "nodeSets": ["big"]}],
        nodeSets=[{"name": "fast", "replicas": 5, "cpus": 2, "realMemoryMib": 2000, "features": ["ib"]},
                  {"name": "big", "replicas": 1, "cpus": 4}],
        slurmConfig={"extra": {"PriorityType": "priority/basic"}, "proctrackType": "proctrack/linuxproc",
                     "taskPlugin": "task/none"})
    result = run_controller(slurm_files(cluster), controller_host(cluster), keys.munge_key, tmp_path,
                            worker=("demo-fast-3", worker_node_conf(cluster.spec.node_sets[0])))
    assert result["ready"], result["log"]
    # Only the worker that registered exists, in every partition that spans its node set; the other
    # node set's partition is there, empty, until one of its workers registers.
    sinfo = {line.split("|")[0]: line.split("|")[1] for line in result["sinfo"].split()}
    assert sinfo == {"cpu": "demo-fast-3", "debug": "demo-fast-3", "quick": "demo-fast-3", "big": ""}
    assert "MaxTime=01:00:00" in result["partitions"]
    (node,) = [ln for ln in result["nodes"].splitlines() if ln.startswith("NodeName=")]
    assert node.startswith("NodeName=demo-fast-3 ") and "CPUTot=2" in node and "RealMemory=2000" in node
    assert "AvailableFeatures=fast,ib" in node and "DYNAMIC" in node
    assert "ClusterName             = demo" in result["config"]


def test_room_for_many_workers_costs_no_node_lines(tmp_path, keys):
    cluster = make_cluster(nodeSets=[{"name": "a", "replicas": 5000}, {"name": "b", "replicas": 5000}],
                           slurmConfig={"maxNodeCount": 65534})  # the most two node sets leave
    result = run_controller(slurm_files(cluster), controller_host(cluster), keys.munge_key, tmp_path)
    assert result["ready"], result["log"]
    assert "MaxNodeCount            = 65536" in result["config"] and "NodeName=" not in result["nodes"]


def test_broken_config_is_refused(tmp_path, keys):
    cluster = make_cluster()
    files = slurm_files(cluster)
    files["slurm.conf"] += "NoSuchSlurmKey=1\n"
    result = run_controller(files, controller_host(cluster), keys.munge_key, tmp_path)
    assert not result["ready"]
    assert result["exit_code"] != 0
    assert "NoSuchSlurmKey" in result["log"]


def test_a_gpu_worker_on_a_node_without_nvidias_library_is_refused_visibly(tmp_path, keys):
    """gres.conf says AutoDetect=nvml for the node set's workers: the image's gpu/nvml plugin loads NVIDIA's libnvidia-ml at run
    time (a GPU node's container toolkit provides it). Without it slurmd finds no GPU, and Slurm drains
    the node with the reason, so no GPU job lands on a node whose GPUs it cannot see."""
    cluster = make_cluster(nodeSets=[{"name": "gpu", "replicas": 1, "gpus": 1}],
                           slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none"})
    result = run_controller(slurm_files(cluster), controller_host(cluster), keys.munge_key, tmp_path,
                            worker=("demo-gpu-0", worker_node_conf(cluster.spec.node_sets[0])))
    assert not result["ready"] and result["failed"] == "slurmd"
    assert "gres/gpu count reported lower than configured (0 < 1)" in result["log"]
    assert "libnvidia-ml.so.1" in (tmp_path / "slurmd.log").read_text()


def test_a_cluster_on_slurm_24_11_gets_a_config_its_daemons_start_with(tmp_path, keys):
    """A cluster being upgraded keeps daemons of 24.11 for a while, and they read slurm.conf too: the
    config written for the oldest release brings a real 24.11 slurmctld up (Debian trixie's, from
    `images/build.py --slurm 24.11`) and a worker registers; the 26.05 config, with 25.11's metrics
    keys, stops it at the first key it does not know."""
    spec = {"nodeSets": [{"name": "fast", "replicas": 2, "cpus": 2, "realMemoryMib": 2000}],
            "healthCheck": {"program": "/opt/soperator/bin/health-check", "interval": 30},
            "slurmConfig": {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none"}}
    old = make_cluster(slurmVersion="24.11", **spec)
    assert old.spec.image("worker").endswith("-slurm24.11")
    result = run_controller(slurm_files(old), controller_host(old), keys.munge_key, tmp_path / "old",
                            worker=("demo-fast-0", worker_node_conf(old.spec.node_sets[0])), release="24.11")
    assert result["ready"], result["log"]
    assert "demo-fast-0" in result["sinfo"] and "SLURM_VERSION           = 24.11" in result["config"]
    assert "MetricsType" not in slurm_files(old)["slurm.conf"]

    new = make_cluster(**spec)
    assert "MetricsType=metrics/openmetrics" in slurm_files(new)["slurm.conf"]
    refused = run_controller(slurm_files(new), controller_host(new), keys.munge_key, tmp_path / "new",
                             release="24.11")
    assert not refused["ready"] and "MetricsType" in refused["log"], refused["log"]


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_an_autoscaling_node_set_is_powered_down_cloud_records_on_each_release(tmp_path, keys, release):
    cluster = make_cluster(slurmVersion=release, nodeSets=[
        {"name": "cpu", "replicas": 1}, {"name": "gpu", "cpus": 4, "autoscale": {"min": 0, "max": 3}}],
        slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none"})
    result = run_controller(slurm_files(cluster), controller_host(cluster), keys.munge_key, tmp_path, release=release)
    assert result["ready"], result["log"]
    nodes = {ln.split()[0]: ln for ln in result["nodes"].splitlines() if ln.startswith("NodeName=")}
    assert sorted(nodes) == [f"NodeName=demo-gpu-{i}" for i in range(3)]  # the FUTURE placeholders are not listed
    assert all("State=IDLE+CLOUD+POWERED_DOWN" in ln and "CPUTot=4" in ln and "AvailableFeatures=gpu" in ln
               for ln in nodes.values()), nodes
    # Power saving is on (a job resumes a node), and SuspendTime is one Slurm never reaches.
    assert "SuspendTime             = 4294967293 sec" in result["config"], result["config"]
    complaints = [ln for ln in result["log"].lower().splitlines()
                  if ("error" in ln or "disabled" in ln) and any(k in ln for k in ("power", "suspend", "resume"))]
    assert not complaints, result["log"]
