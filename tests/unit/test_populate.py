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


@pytest.fixture
def host(tmp_path):
    """Files outside the jail that a planted symlink points at: they must never change."""
    path = tmp_path / "host"
    path.mkdir()
    (path / "shadow").write_text("host secret\n")
    os.chmod(path / "shadow", 0o600)
    return path


def _host_state(host):
    return sorted((p.name, p.read_bytes(), p.stat().st_mode, p.stat().st_uid) for p in host.iterdir())


def test_links_planted_in_the_jail_are_never_written_through(rootfs, jail, host):
    populate(str(rootfs), str(jail), overwrite=False)
    before = _host_state(host)
    # What a root user in the jail can plant on the shared volume before the next overwrite run:
    (jail / "usr" / "bin" / "tool").unlink()
    (jail / "usr" / "bin" / "tool").symlink_to(host / "shadow")           # a file replaced by a link
    os.rename(jail / "usr" / "lib", jail / "usr" / "lib-moved")
    (jail / "usr" / "lib").symlink_to(host)                                # a directory replaced by a link
    (jail / "etc" / "os-release.soperator-tmp").symlink_to(host / "shadow")  # the old temporary name
    (rootfs / "etc" / "os-release").write_text("ID=jail\nVERSION_ID=2\n")  # a newer image: rewritten
    result = populate(str(rootfs), str(jail), overwrite=True)
    assert result["action"] == "populated"
    assert _host_state(host) == before
    assert not (jail / "usr" / "bin" / "tool").is_symlink()
    assert (jail / "usr" / "bin" / "tool").read_text() == "#!/bin/sh\necho v1\n"
    assert not (jail / "usr" / "lib").is_symlink() and (jail / "usr" / "lib" / "lib0.so").is_file()
    assert not (host / "lib0.so").exists()
    assert (jail / "etc" / "os-release").read_text() == "ID=jail\nVERSION_ID=2\n"


def test_a_planted_marker_directory_link_is_replaced_not_followed(rootfs, jail, host):
    (jail / ".soperator").symlink_to(host)
    result = populate(str(rootfs), str(jail), overwrite=True)
    assert result["action"] == "populated"
    assert sorted(p.name for p in host.iterdir()) == ["shadow"]
    assert (jail / ".soperator").is_dir() and not (jail / ".soperator").is_symlink()
    assert (jail / SENTINEL).is_file()


def test_a_volume_with_foreign_files_is_refused_unless_overwrite(rootfs, jail):
    (jail / "data").mkdir()
    (jail / "data" / "results.csv").write_text("precious\n")
    (jail / "lost+found").mkdir()
    refused = populate(str(rootfs), str(jail), overwrite=False)
    assert refused["action"] == "refused" and "data" in refused["reason"]
    assert sorted(os.listdir(jail)) == ["data", "lost+found"]
    proc = subprocess.run([sys.executable, "-m", "soperator.node.populate", "--source", str(rootfs),
                           "--target", str(jail)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 3 and "populateJail.overwrite" in proc.stderr
    assert populate(str(rootfs), str(jail), overwrite=True)["action"] == "populated"
    assert (jail / "data" / "results.csv").read_text() == "precious\n"
