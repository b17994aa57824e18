"""A starting worker empties the bases of jobs' private tmp and shm directories (soperator/node/job_dirs.py)."""
from __future__ import annotations

import os
import stat

from soperator.node.job_dirs import clear_job_dirs


def test_what_a_dead_container_left_is_removed_and_the_bases_are_roots(tmp_path):
    tmp_base, shm_base = tmp_path / "job-tmp", tmp_path / "shm" / ".jobs"
    (tmp_base / "17" / "deep").mkdir(parents=True)
    (tmp_base / "17" / "deep" / "file").write_text("x")
    (tmp_base / "stray").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    (tmp_base / "18").symlink_to(outside)
    os.chmod(tmp_base, 0o777)
    said = clear_job_dirs((str(tmp_base), str(shm_base)))
    assert "3 left over" in said
    for base in (tmp_base, shm_base):
        assert os.listdir(base) == []
        assert stat.S_IMODE(base.stat().st_mode) == 0o700
    assert (outside / "keep").exists()  # a link is removed, never followed
