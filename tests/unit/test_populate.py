"""populate-jail on real directories: idempotent, keeps user data, survives being killed midway."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from soperator.node.populate import SENTINEL, populate
from tests.support_paths import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="populate-jail sets ownership: needs root")


def make_rootfs(root, files=20):
    for d in ("etc", "usr/bin", "usr/lib", "home", "root", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release").write_text("ID=jail\n")
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (root / "usr" / "bin" / "tool").write_text("#!/bin/sh\necho v1\n")
    os.chmod(root / "usr" / "bin" / "tool", 0o755)
    (root / "bin").symlink_to("usr/bin")
    (root / "etc" / "secret").write_text("s")
    os.chmod(root / "etc" / "secret", 0o600)
    os.chown(root / "etc" / "secret", 0, 42)
    for i in range(files):
        (root / "usr" / "lib" / f"lib{i}.so").write_bytes(os.urandom(1024))
    return root


@pytest.fixture
def rootfs(tmp_path):
    return make_rootfs(tmp_path / "rootfs")


@pytest.fixture
def jail(tmp_path):
    path = tmp_path / "jail"
    path.mkdir(mode=0o777)
    os.chmod(path, 0o777)
    return path


def test_first_fill_copies_everything_and_marks_done(rootfs, jail):
    result = populate(str(rootfs), str(jail), overwrite=False)
    assert result["action"] == "populated"
    assert (jail / "usr" / "bin" / "tool").read_text() == "#!/bin/sh\necho v1\n"
    assert os.readlink(jail / "bin") == "usr/bin"
    st = os.stat(jail / "etc" / "secret")
    assert (st.st_mode & 0o777, st.st_gid) == (0o600, 42)
    root_st = os.stat(jail)
    assert (root_st.st_uid, root_st.st_mode & 0o777) == (0, 0o755)
    assert json.loads((jail / SENTINEL).read_text())["overwrite"] is False


def test_rerun_without_overwrite_changes_nothing(rootfs, jail):
    populate(str(rootfs), str(jail), overwrite=False)
    (jail / "home" / "alice").mkdir()
    (jail / "home" / "alice" / "thesis.tex").write_text("mine")
    (jail / "usr" / "bin" / "tool").write_text("patched by the user")
    (rootfs / "usr" / "bin" / "tool").write_text("#!/bin/sh\necho v2\n")
    assert populate(str(rootfs), str(jail), overwrite=False)["action"] == "skipped"
    assert (jail / "home" / "alice" / "thesis.tex").read_text() == "mine"
    assert (jail / "usr" / "bin" / "tool").read_text() == "patched by the user"


def test_overwrite_replaces_system_files_and_keeps_user_data(rootfs, jail):
    populate(str(rootfs), str(jail), overwrite=False)
    (jail / "home" / "bob.txt").write_text("keep")
    (jail / "root" / ".bashrc").write_text("keep too")
    with open(jail / "etc" / "passwd", "a") as fh:
        fh.write("alice:x:1000:1000::/home/alice:/bin/bash\n")
    (jail / "usr" / "bin" / "mine").write_text("installed by a user")
    (rootfs / "usr" / "bin" / "tool").write_text("#!/bin/sh\necho v2\n")
    (rootfs / "home" / "bob.txt").write_text("image version")
    result = populate(str(rootfs), str(jail), overwrite=True)
    assert result["action"] == "populated" and result["kept"] >= 3
    assert (jail / "usr" / "bin" / "tool").read_text() == "#!/bin/sh\necho v2\n"
    assert (jail / "home" / "bob.txt").read_text() == "keep"
    assert (jail / "root" / ".bashrc").read_text() == "keep too"
    assert "alice" in (jail / "etc" / "passwd").read_text()
    assert (jail / "usr" / "bin" / "mine").read_text() == "installed by a user"


def test_killed_fill_is_completed_by_the_next_run(tmp_path, jail):
    rootfs = make_rootfs(tmp_path / "big", files=4000)
    cmd = [sys.executable, "-m", "soperator.node.populate", "--source", str(rootfs), "--target", str(jail)]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    deadline = time.monotonic() + 30
    while not (jail / "usr" / "lib").exists() or len(os.listdir(jail / "usr" / "lib")) < 50:
        assert time.monotonic() < deadline and proc.poll() is None, "fill finished before it could be killed"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (jail / SENTINEL).exists()
    assert len(os.listdir(jail / "usr" / "lib")) < 4000
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)["populate-jail"]["action"] == "populated"
    assert (jail / SENTINEL).exists()
    for i in (0, 1999, 3999):
        assert (jail / "usr" / "lib" / f"lib{i}.so").read_bytes() == (rootfs / "usr" / "lib" / f"lib{i}.so").read_bytes()
    assert not list(jail.rglob("*.soperator-tmp"))


def test_missing_volume_is_a_clear_error(rootfs, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "soperator.node.populate", "--source", str(rootfs), "--target",
                           str(tmp_path / "absent")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "jail volume" in proc.stderr and "absent" in proc.stderr
