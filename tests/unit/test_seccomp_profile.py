"""The Pyxis workers' seccomp profile as written (its effect is tested on the real kubelet in
tests/kube/test_seccomp_profile.py and under runc in tests/e2e/test_containers_e2e.py), the file the
operator chart ships, and the DaemonSet's copy into the kubelet's directory."""
from __future__ import annotations

import os
import subprocess
import sys

from soperator import generate
from soperator.render.seccomp_profile import (NOT_OFFERED, REFUSED, profile_file_name, profile_json,
                                               pyxis_worker_profile, pyxis_worker_profile_path)
from soperator.seccomp_install import install_profiles
from tests.support_paths import ROOT, SECCOMP_FILES


def test_the_chart_ships_the_profile_the_code_writes_under_its_digest():
    assert sorted(os.listdir(SECCOMP_FILES)) == [profile_file_name()], \
        f"run `{generate.COMMAND}` (it writes every generated file)"
    assert (SECCOMP_FILES / profile_file_name()).read_text() == profile_json(), \
        f"run `{generate.COMMAND}` (it writes every generated file)"
    assert pyxis_worker_profile_path() == f"soperator/{profile_file_name()}"
    out = subprocess.run([sys.executable, "-m", "soperator.cli", "seccomp-profile"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert out == profile_json()


def test_an_allowlist_that_lets_enroot_pivot_root_and_refuses_the_nodes_powers():
    profile = pyxis_worker_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO" and profile["defaultErrnoRet"] == 38  # ENOSYS
    allowed = set(profile["syscalls"][0]["names"])
    assert {"pivot_root", "mount", "umount2", "unshare", "setns", "clone3", "chroot"} <= allowed
    assert allowed.isdisjoint(REFUSED | NOT_OFFERED) and allowed.isdisjoint({
        "init_module", "kexec_load", "open_by_handle_at", "personality", "nfsservctl", "io_uring_setup"})
    refusal = profile["syscalls"][-1]
    assert set(refusal["names"]) == REFUSED and refusal["errnoRet"] == 1  # EPERM


def test_install_writes_only_what_changed_and_replaces_whole_files(tmp_path):
    source, target = tmp_path / "from", tmp_path / "to"
    source.mkdir()
    target.mkdir()
    (source / "a.json").write_text("{}")
    (source / "notes.txt").write_text("not a profile")
    assert install_profiles(source, target) == ["a.json"]
    inode = (target / "a.json").stat().st_ino
    assert install_profiles(source, target) == []
    (source / "a.json").write_text('{"defaultAction": "SCMP_ACT_ERRNO"}')
    assert install_profiles(source, target) == ["a.json"]
    assert (target / "a.json").read_text() == '{"defaultAction": "SCMP_ACT_ERRNO"}'
    assert (target / "a.json").stat().st_ino != inode  # renamed over, never rewritten in place
    assert sorted(os.listdir(target)) == ["a.json"] and oct((target / "a.json").stat().st_mode & 0o777) == "0o644"
    # A copy cut short (the pod killed mid-write) leaves its temporary file: the next start sweeps it.
    (target / ".a.json.x1y2z3").write_text("{")
    install_profiles(source, target)
    assert sorted(os.listdir(target)) == ["a.json"]
