"""Every key a template writes is refused in `extra`: render the templates with every optional part
switched on, read the keys back with Slurm's grammar, and compare with the managed sets."""
from __future__ import annotations

from soperator.api.slurm_config import MANAGED_CGROUP_KEYS, MANAGED_PARTITION_KEYS, MANAGED_SLURM_KEYS
from soperator.render.configs import slurm_files
from tests.conftest import make_cluster
from tests.support.slurm_grammar import parse

EVERYTHING = make_cluster(nodeSets=[{"name": "gpu", "replicas": 3, "gpus": 2, "gres": ["shard:4"], "features": ["f"]},
                                    {"name": "cpu"}],
                          slurmConfig={"defMemPerCpuMib": 1000},
                          healthCheck={"program": "/usr/bin/check", "interval": 60})


def _keys(text: str, first: str | None = None, skip_first: str | None = None) -> set[str]:
    lines = parse(text)
    if first:
        lines = [line for line in lines if line[0][0] == first]
    if skip_first:
        lines = [line for line in lines if line[0][0] != skip_first]
    return {key.lower() for line in lines for key, _ in line}


def test_every_slurm_conf_key_the_template_writes_is_managed():
    files = slurm_files(EVERYTHING)
    written = _keys(files["slurm.conf"], skip_first="PartitionName") - {"partitionname"}
    assert written - MANAGED_SLURM_KEYS == set(), (
        "add these keys to MANAGED_SLURM_KEYS (soperator/api/slurm_config.py), then run `soperator generate`: "
        "the CRD's rule on slurmConfig.extra lists them (docs/where-to-change.md)")
    assert "partitionname" in MANAGED_SLURM_KEYS and "nodename" in MANAGED_SLURM_KEYS


def test_every_partition_key_the_template_writes_is_managed():
    written = _keys(slurm_files(EVERYTHING)["slurm.conf"], first="PartitionName")
    assert written and written - MANAGED_PARTITION_KEYS == set(), (
        "add these keys to MANAGED_PARTITION_KEYS (soperator/api/slurm_config.py), then run `soperator generate`")


def test_every_cgroup_key_the_template_writes_is_managed():
    for gpus in (0, 2):
        written = _keys(slurm_files(make_cluster(nodeSets=[{"name": "n", "gpus": gpus}]))["cgroup.conf"])
        assert written and written - MANAGED_CGROUP_KEYS == set(), (
            "add these keys to MANAGED_CGROUP_KEYS (soperator/api/slurm_config.py), then run `soperator generate`")
