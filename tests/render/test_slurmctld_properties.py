"""Property test on a real slurmctld (hypothesis): the slurm.conf, gres.conf, cgroup.conf and
plugstack.conf soperator renders from a random valid SlurmCluster start the node image's slurmctld."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from soperator.api import parse_cluster
from soperator.render.configs import controller_host, slurm_files
from tests.support.slurm import run_controller
from tests.support.spec_strategies import valid_manifests

pytestmark = pytest.mark.slurm


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(manifest=valid_manifests())
def test_random_valid_clusters_start_slurmctld(tmp_path_factory, keys, manifest):
    cluster = parse_cluster(manifest)
    result = run_controller(slurm_files(cluster), controller_host(cluster), keys.munge_key,
                            tmp_path_factory.mktemp("slurmctld"))
    assert result["ready"], result["log"][-3000:]
    assert f"ClusterName             = {cluster.name}" in result["config"]
