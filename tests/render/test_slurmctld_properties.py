"""Property test on real Slurm daemons (hypothesis): the slurm.conf, gres.conf, cgroup.conf and
plugstack.conf soperator renders from a random valid SlurmCluster start the node image's slurmctld,
and each node set's worker slurmd (its gres and gres device files included) starts on them and
registers idle, as its pod would: valid means every daemon starts."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, example, given, settings

from soperator.api import parse_cluster
from soperator.api.cluster import SlurmCluster
from soperator.api.spec import NodeSetSpec
from soperator.node.layout import member_name
from soperator.render.common import object_name
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.support.slurm import SlurmSandbox, node_image
from tests.support.spec_strategies import API, valid_manifests
from tests.support.wait import until

pytestmark = pytest.mark.slurm
# What slurmd finds on this machine: a node configured with more is drained (Low RealMemory).
MACHINE_MIB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 * 9 // 10
# Every run starts at least this: typed and untyped gres, with a range of device files and one file.
GRES_FILES = {**API, "metadata": {"name": "props"}, "spec": {
    "nodeSets": [{"name": "cpu", "replicas": 1, "gres": ["nic:mlx5:2", "fpga:1", "bandwidth:8"],
                  "gresFiles": {"nic:mlx5": "/dev/infiniband/uverbs[0-1]", "fpga": "/dev/fpga/fpga0"}}],
    "partitions": [{"name": "main", "default": True, "nodeSets": ["cpu"]}],
    "slurmConfig": {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none"}}}


def device_files(node_set: NodeSetSpec) -> list[str]:
    """Each path a node set's gresFiles name, ranges spelled out (/dev/nic/nic[0-1]: two files)."""
    paths = []
    for files in node_set.gres_files.values():
        if "[" not in files:
            paths.append(files)
            continue
        stem, ranges = files[:-1].split("[", 1)
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            paths += [f"{stem}{n}" for n in range(int(low), int(high or low) + 1)]
    return paths


def start_worker(box: SlurmSandbox, cluster: SlurmCluster, node_set: NodeSetSpec, index: int) -> str:
    """The node set's first worker: its device files where the device plugin would put them, then
    its slurmd registering as the pod's does (`-Z --conf` with worker_node_conf)."""
    for path in device_files(node_set):
        made = box.run("sh", "-c", f'mkdir -p "$(dirname {path})" && {{ [ -e {path} ] || mknod {path} c 1 3; }}')
        assert made.returncode == 0, made.stderr
    name = member_name(object_name(cluster, node_set.name), 0)
    box.start_netns_slurmd(name, index, worker_node_conf(node_set))
    return name


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(manifest=valid_manifests(max_memory_mib=MACHINE_MIB))
@example(manifest=GRES_FILES)
def test_random_valid_clusters_start_slurmctld_and_each_node_sets_slurmd(tmp_path_factory, keys, manifest):
    cluster = parse_cluster(manifest)
    with SlurmSandbox(tmp_path_factory.mktemp("slurm"), slurm_files(cluster), controller_host(cluster),
                      keys.munge_key, image=node_image()) as box:
        assert box.status["ready"], box.log("slurmctld.log")[-3000:]
        assert f"ClusterName             = {cluster.name}" in box.run("scontrol", "show", "config").stdout
        # A node set with GPUs detects them through NVIDIA's library (gres.conf AutoDetect=nvml), which
        # only a GPU machine has; tests/render/test_slurmctld.py checks that slurmd's refusal there is
        # visible. Every other node set's slurmd starts here.
        # maxNodeCount is the room for dynamic nodes: a worker past it is refused by design.
        node_sets = [n for n in cluster.spec.node_sets if not n.gpus][:cluster.spec.slurm_config.max_node_count]
        started = [start_worker(box, cluster, n, i) for i, n in enumerate(node_sets, 1)]
        for name, node_set in zip(started, node_sets):
            def shown(name=name) -> str:
                return box.run("scontrol", "-o", "show", "node", name).stdout
            try:
                line = until(lambda: "State=IDLE" in shown() and shown(), 60, f"{name} to register idle")
            except AssertionError as late:
                raise AssertionError(f"{late}\n{shown()}\nslurmd: {box.slurmd_log()}\n"
                                     f"slurmctld: {box.log('slurmctld.log')}") from None
            assert "Reason=" not in line, line
            for entry in node_set.gres:
                assert entry.rsplit(":", 1)[0] in line, (entry, line)
