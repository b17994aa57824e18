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
