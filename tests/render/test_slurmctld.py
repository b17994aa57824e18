"""The rendered Slurm configs are accepted by a real slurmctld (Debian's slurm-wlm)."""
import pytest

from soperator.render.configs import controller_host, slurm_files
from tests.conftest import make_cluster
from tests.support.slurm import run_controller

pytestmark = pytest.mark.slurm


def test_rendered_config_brings_slurmctld_up(tmp_path, keys):
    cluster = make_cluster(
        partitions=[{"name": "cpu", "default": True}, {"name": "debug", "maxTime": "01:00:00"}],
        workers={"replicas": 5, "cpus": 4, "realMemoryMib": 8000, "gpus": 2, "features": ["fast"]},
        slurmConfig={"extra": {"PriorityType": "priority/basic"}})
    result = run_controller(slurm_files(cluster), controller_host(cluster), keys.munge_key, tmp_path)
    assert result["ready"], result["log"]
    sinfo = {line.split("|")[0]: line.split("|")[1] for line in result["sinfo"].split()}
    assert sinfo == {"cpu": "demo-worker-[0-4]", "debug": "demo-worker-[0-4]"}
    assert "MaxTime=01:00:00" in result["partitions"]
    node = [ln for ln in result["nodes"].splitlines() if ln.startswith("NodeName=demo-worker-3 ")][0]
    assert "CPUTot=4" in node and "RealMemory=8000" in node and "Gres=gpu:2" in node
    assert "AvailableFeatures=fast" in node
    assert "ClusterName             = demo" in result["config"]


def test_single_worker_and_many_workers(tmp_path, keys):
    cluster = make_cluster(workers={"replicas": 2000})
    result = run_controller(slurm_files(cluster), controller_host(cluster), keys.munge_key, tmp_path)
    assert result["ready"], result["log"]
    assert result["nodes"].count("NodeName=") == 2000


def test_broken_config_is_refused(tmp_path, keys):
    cluster = make_cluster()
    files = slurm_files(cluster)
    files["slurm.conf"] += "NoSuchSlurmKey=1\n"
    result = run_controller(files, controller_host(cluster), keys.munge_key, tmp_path)
    assert not result["ready"]
    assert result["exit_code"] != 0
    assert "NoSuchSlurmKey" in result["log"]
