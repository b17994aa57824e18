"""The accounting database's data directory outlives the image that made it: one made by another
image's mysql user (an older release's image had other ids) is handed to this image's, every file;
a first start (no database yet) is not this path."""
from __future__ import annotations

import os
from types import SimpleNamespace

from soperator.node import database

THIS_IMAGES_MYSQL = SimpleNamespace(pw_uid=4242, pw_gid=4243)


def test_a_database_of_another_mysql_user_is_handed_to_this_images(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "mysql").mkdir(parents=True)
    (data / "slurm_acct_db").mkdir()
    (data / "slurm_acct_db" / "job_table.ibd").write_bytes(b"x")
    (data / "ibdata1").write_bytes(b"y")
    for path in (data, data / "mysql", data / "slurm_acct_db", data / "slurm_acct_db" / "job_table.ibd",
                 data / "ibdata1"):
        os.chown(path, 100, 102)  # trixie's mysql
    monkeypatch.setattr(database.pwd, "getpwnam", lambda name: THIS_IMAGES_MYSQL)
    assert database.prepare_datadir(str(data)) is False  # not a first start: nothing initialised
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [data, *data.rglob("*")]}
    assert owners == {(4242, 4243)}
    assert (data / "ibdata1").read_bytes() == b"y"  # contents untouched


def test_a_database_of_this_images_mysql_user_is_left_as_it_is(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "mysql").mkdir(parents=True)
    (data / "other").write_bytes(b"z")
    os.chown(data, 4242, 4243)
    os.chown(data / "other", 7, 7)  # not walked: the top is already this image's
    monkeypatch.setattr(database.pwd, "getpwnam", lambda name: THIS_IMAGES_MYSQL)
    assert database.prepare_datadir(str(data)) is False
    assert (data / "other").stat().st_uid == 7
