"""What a node binds into the jail (soperator/node/mounts.py), planned against a jail directory: the
node's jail plugin is lent only to a jail without its own copy, since the jail's Slurm clients load
the copy built for their release (an upgrade leaves the jail a release behind the nodes for a while)."""
from __future__ import annotations

from soperator.node import mounts
from soperator.node.layout import PATHS


def _paths(jail) -> list[str]:
    return [b.path for b in mounts.wanted_in(str(jail), mounts.WORKER)]


def test_a_jail_with_its_own_plugin_keeps_it(tmp_path):
    plugin = tmp_path / PATHS.chroot_plugin.lstrip("/")
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(b"\x7fELF built for the jail's Slurm")
    assert PATHS.lib_dir not in _paths(tmp_path)
    assert _paths(tmp_path) == [b.path for b in mounts.WORKER if b.path != PATHS.lib_dir]  # the rest as before


def test_a_jail_without_one_is_lent_the_nodes(tmp_path):
    (tmp_path / PATHS.lib_dir.lstrip("/")).mkdir(parents=True)  # an empty directory is no copy
    assert _paths(tmp_path) == [b.path for b in mounts.WORKER]


def test_what_a_node_daemon_reads_is_read_only_in_the_jail():
    """slurmd's fetched configuration (slurmstepd loads plugstack.conf from it before the jail) and
    munged's socket directory: root in the jail may read and connect, never write (security.md)."""
    binds = {b.path: b for b in mounts.WORKER}
    order = [b.path for b in mounts.WORKER]
    cache = binds[PATHS.worker_conf_cache]
    assert cache.read_only and cache.make  # never skipped for a slurmd that has not made it yet
    assert order.index(PATHS.worker_spool) < order.index(PATHS.worker_conf_cache)  # on top of the spool's bind
    assert PATHS.worker_conf_cache.startswith(PATHS.worker_spool + "/")
    assert binds[PATHS.munge_run_dir].read_only and binds[PATHS.configless_dir].read_only
    assert all(b.read_only for b in mounts.LOGIN if b.path in (PATHS.munge_run_dir, PATHS.configless_dir))
