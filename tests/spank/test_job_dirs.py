"""A job's private /tmp and /dev/shm (spank_chroot/job_dirs.c), through the cffi binding: the per-job
directory under a root-only base, its removal, and its bind over the jail's as a step enters."""
from __future__ import annotations

import os
import stat

import pytest

from tests.spank.test_jail_binding import _bind_usr, _err, _in_child
from tests.support.thin_jail import make_thin_jail

lib_mod = pytest.importorskip("spank_chroot._jail", reason="run `python -m spank_chroot.build` first")
ffi, lib = lib_mod.ffi, lib_mod.lib
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (ownership, mounts)")
JOB = 4242


def _job_dir(base) -> str:
    path, err = ffi.new("char[4096]"), _err()
    assert lib.soperator_job_dir(str(base).encode(), JOB, path, 4096, err, 512) == 0, ffi.string(err)
    return ffi.string(path).decode()


def test_a_jobs_directory_is_roots_sticky_and_shared_by_its_steps(tmp_path):
    base = tmp_path / "made" / "job-tmp"
    first = _job_dir(base)
    assert first == f"{base}/{JOB}"
    assert stat.S_IMODE(base.stat().st_mode) == 0o700 and base.stat().st_uid == 0
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o1777 and os.stat(first).st_uid == 0
    (base / str(JOB) / "from-step-0").write_text("kept")
    assert _job_dir(base) == first  # a second step of the job on this node
    assert (base / str(JOB) / "from-step-0").read_text() == "kept"


@pytest.mark.parametrize("case", ["base others may write", "base is a link", "job entry is a link",
                                  "job entry is a user's"])
def test_a_directory_someone_else_could_have_planted_is_refused(tmp_path, case):
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if case == "base others may write":
        os.chmod(base, 0o1777)
    elif case == "base is a link":
        base.rmdir()
        base.symlink_to(elsewhere)
    elif case == "job entry is a link":
        (base / str(JOB)).symlink_to(elsewhere)
    else:
        (base / str(JOB)).mkdir()
        os.chown(base / str(JOB), 65534, 65534)
    path, err = ffi.new("char[4096]"), _err()
    assert lib.soperator_job_dir(str(base).encode(), JOB, path, 4096, err, 512) == -1
    assert str(base).encode() in ffi.string(err)


def test_removal_takes_the_whole_tree_and_follows_no_link(tmp_path):
    base = tmp_path / "base"
    job = _job_dir(base)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the job's")
    os.makedirs(f"{job}/a/b/c")
    for name in ("a/file", "a/b/c/deep", ".hidden"):
        with open(f"{job}/{name}", "w") as fh:
            fh.write("x")
    os.symlink(outside, f"{job}/a/to-dir")
    os.symlink(outside / "keep", f"{job}/to-file")
    os.chmod(f"{job}/a/b", 0o500)  # a user's read-only directory does not stop root
    err = _err()
    assert lib.soperator_remove_job_dir(str(base).encode(), JOB, err, 512) == 0, ffi.string(err)
    assert os.listdir(base) == []
    assert (outside / "keep").read_text() == "not the job's"
    assert lib.soperator_remove_job_dir(str(base).encode(), JOB, err, 512) == 0  # gone already: fine


def test_a_step_sees_its_jobs_directories_as_tmp_and_dev_shm(tmp_path):
    jail = str(make_thin_jail(tmp_path / "jail"))
    os.makedirs(f"{jail}/dev/shm")
    tmp_dir, shm_dir = _job_dir(tmp_path / "job-tmp"), _job_dir(tmp_path / "job-shm")

    def child(out):
        _bind_usr(jail)
        sources = [ffi.new("char[]", p.encode()) for p in (tmp_dir, shm_dir)]
        targets = [ffi.new("char[]", p) for p in (b"/tmp", b"/dev/shm")]
        binds = ffi.new("struct soperator_bind[2]")
        for i in range(2):
            binds[i].source, binds[i].target = sources[i], targets[i]
        err = _err()
        if lib.soperator_enter_jail_with(jail.encode(), binds, 2, err, 512) != 0:
            os.write(out, b"ERR " + ffi.string(err))
            return 3
        with open("/tmp/scratch", "w") as fh, open("/dev/shm/segment", "w") as seg:
            fh.write("job")
            seg.write("job")
        flags = {line.split()[4]: line.split()[5] for line in open("/proc/self/mountinfo")}
        os.write(out, f"{flags['/tmp']} {flags['/dev/shm']}".encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    assert all({"nosuid", "nodev"} <= set(opts.split(",")) for opts in data.decode().split())
    assert os.listdir(tmp_dir) == ["scratch"] and os.listdir(shm_dir) == ["segment"]
    assert os.listdir(f"{jail}/tmp") == [] and os.listdir(f"{jail}/dev/shm") == []  # the jail's own: untouched


def test_a_bind_that_cannot_be_made_fails_the_entry(tmp_path):
    jail = str(make_thin_jail(tmp_path / "jail"))  # no dev/shm in this jail
    shm_dir = _job_dir(tmp_path / "job-shm")

    def child(out):
        _bind_usr(jail)
        source, target = ffi.new("char[]", shm_dir.encode()), ffi.new("char[]", b"/dev/shm/missing")
        binds = ffi.new("struct soperator_bind[1]")
        binds[0].source, binds[0].target = source, target
        err = _err()
        rc = lib.soperator_enter_jail_with(jail.encode(), binds, 1, err, 512)
        os.write(out, ffi.string(err))
        return 0 if rc == -1 else 4

    code, data = _in_child(child)
    assert code == 0 and b"/dev/shm/missing" in data, data
