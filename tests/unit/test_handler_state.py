"""The operator's state lives in kopf's memo: one lock per cluster, dropped with the cluster."""
from __future__ import annotations

from soperator.handlers import ClusterLocks


def test_one_lock_per_cluster_and_a_deleted_clusters_lock_is_dropped():
    locks = ClusterLocks()
    first = locks.of("hpc", "a")
    assert locks.of("hpc", "a") is first and locks.of("hpc", "b") is not first
    locks.forget("hpc", "a")
    assert locks.of("hpc", "a") is not first  # a cluster made again under the name starts afresh

