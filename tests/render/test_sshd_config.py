"""The rendered sshd_config is accepted by the real OpenSSH server (`sshd -t`)."""
import os
import shutil
import subprocess
import sys

import pytest

from soperator.render.configs import sshd_files
from tests.conftest import make_cluster
from tests.support_paths import ROOT

pytestmark = pytest.mark.sshd


def _sshd_test(files: dict[str, str], keys, tmp_path) -> subprocess.CompletedProcess:
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.fail("sshd missing: install openssh-server (see .ci/run)", pytrace=False)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for key_type, key in keys.ssh_host_keys.items():
        (tmp_path / f"ssh_host_{key_type}_key").write_text(key.private)
        (tmp_path / f"ssh_host_{key_type}_key.pub").write_text(key.public + "\n")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-m",
                           "tests.support.sshd_check", str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_rendered_sshd_config_passes_sshd_t(keys, tmp_path):
    key = keys.ssh_host_keys["ed25519"].public
    proc = _sshd_test(sshd_files(make_cluster(login={"rootSshPublicKeys": [key]})), keys, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sshd_t_rejects_a_broken_config(keys, tmp_path):
    files = sshd_files(make_cluster())
    files["sshd_config"] = files["sshd_config"].replace("ChrootDirectory", "ChrootDirectoryy")
    proc = _sshd_test(files, keys, tmp_path)
    assert proc.returncode != 0 and "ChrootDirectoryy" in proc.stdout


def test_password_and_interactive_logins_are_off():
    config = sshd_files(make_cluster())["sshd_config"]
    lines = {ln.strip() for ln in config.splitlines()}
    for required in ("PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
                     "PermitRootLogin prohibit-password", "ChrootDirectory /mnt/jail"):
        assert required in lines
