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


@pytest.mark.parametrize("login", [{}, {"rootSshPublicKeys": ["KEY"], "allowForwarding": True}],
                         ids=["defaults", "root-keys-and-forwarding"])
def test_rendered_sshd_config_passes_sshd_t(keys, tmp_path, login):
    key = keys.ssh_host_keys["ed25519"].public
    login = {k: [key] if v == ["KEY"] else v for k, v in login.items()}
    proc = _sshd_test(sshd_files(make_cluster(login=login)), keys, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sshd_t_rejects_a_broken_config(keys, tmp_path):
    files = sshd_files(make_cluster())
    files["sshd_config"] = files["sshd_config"].replace("MaxAuthTries", "MaxAuthTriess")
    proc = _sshd_test(files, keys, tmp_path)
    assert proc.returncode != 0 and "MaxAuthTriess" in proc.stdout


def _lines(**login) -> list[str]:
    return [ln.strip() for ln in sshd_files(make_cluster(login=login))["sshd_config"].splitlines()]


def test_password_and_interactive_logins_are_off():
    lines = _lines()
    for required in ("PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM yes",
                     "MaxAuthTries 3", "LogLevel VERBOSE"):
        assert required in lines
    # Sessions enter the jail in PAM's account step (pam_jail.c), never through sshd's plain chroot.
    assert not any(ln.startswith("ChrootDirectory") for ln in lines)


def _pam(**login) -> list[str]:
    return [ln.split() for ln in sshd_files(make_cluster(login=login))["pam_sshd"].splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_pam_authenticates_nobody_and_puts_each_login_into_its_users_cgroup():
    """PAM never accepts a password (keys are sshd's), and every login goes through session-limits with
    the spec's limits in bytes and thousandths of a CPU, in the account step, whose refusal refuses it."""
    pam = _pam(sessionLimits={"memory": "512Mi", "cpu": "1500m"})
    assert ["auth", "required", "pam_deny.so"] in pam and ["password", "required", "pam_deny.so"] in pam
    assert [ln for ln in pam if ln[0] == "auth"] == [["auth", "required", "pam_deny.so"]]
    assert ["account", "required", "pam_unix.so"] in pam
    assert ["account", "required", "pam_exec.so", "type=account", "/opt/soperator/bin/session-limits",
            "--memory", str(512 * 2**20), "--cpu", "1500"] in pam
    assert ["--memory", str(4 * 2**30), "--cpu", "2000"] == _pam()[-3][-4:]  # the defaults: 4Gi, 2 CPUs
    assert ["--memory", "0", "--cpu", "250"] == _pam(sessionLimits={"memory": 0, "cpu": "250m"})[-3][-4:]
    # Last of the account step, after the cgroup: the connection enters the jail, or is refused.
    for stack in (pam, unlimited := _pam(sessionLimits={"memory": "0", "cpu": 0})):
        assert [ln for ln in stack if ln[0] == "account"][-1] == [
            "account", "required", "/opt/soperator/lib/pam_soperator_jail.so", "/mnt/jail"]
    assert not any("pam_exec.so" in ln for ln in unlimited) and ["session", "required", "pam_permit.so"] in unlimited


def test_root_cannot_log_in_unless_the_spec_names_its_keys(keys):
    assert "PermitRootLogin no" in _lines() and "Match User root" not in _lines()
    lines = _lines(rootSshPublicKeys=[keys.ssh_host_keys["ed25519"].public])
    match = lines[lines.index("Match User root"):]
    # Only the keys from the ConfigMap (copied to /run by the entrypoint): never the jail's
    # /root/.ssh, which any jail root could edit.
    assert match == ["Match User root", "PermitRootLogin prohibit-password",
                     "AuthorizedKeysFile /run/soperator/root_authorized_keys"]


def test_forwarding_is_off_unless_asked():
    assert {"DisableForwarding yes", "AllowTcpForwarding no", "AllowAgentForwarding no",
            "AllowStreamLocalForwarding no", "PermitTunnel no"} <= set(_lines())
    assert "AllowTcpForwarding yes" in _lines(allowForwarding=True)
    assert not [ln for ln in _lines() if ln.startswith(("Ciphers", "MACs")) and ("cbc" in ln or "sha1" in ln)]
