"""soperator/node/private_file.py: the one writer of the nodes' private files (keys, sssd.conf, root's
authorized_keys)."""
from __future__ import annotations

import os
import stat

from soperator.node.private_file import write_private


def test_a_private_file_has_its_mode_and_owner_and_is_replaced_whole(tmp_path):
    path = tmp_path / "key"
    write_private(str(path), b"one", 0o400, (1234, 4321))
    info = path.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o400, 1234, 4321)
    first = info.st_ino
    write_private(str(path), b"two")
    info = path.stat()
    assert path.read_bytes() == b"two" and info.st_ino != first  # a new file swapped in, never rewritten
    assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o600, 0)
    assert os.listdir(tmp_path) == ["key"]


def test_a_link_planted_where_the_new_file_goes_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "key.new").symlink_to(target)
    write_private(str(tmp_path / "key"), b"secret")
    assert target.read_text() == "untouched" and (tmp_path / "key").read_bytes() == b"secret"
    assert not (tmp_path / "key.new").is_symlink() and not (tmp_path / "key.new").exists()
