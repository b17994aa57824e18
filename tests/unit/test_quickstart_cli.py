"""The quick start refuses to start, with the reason, when what it needs is missing."""
from __future__ import annotations

import subprocess
import sys

from tests.support_paths import ROOT

SCRIPT = ROOT / "examples" / "quickstart.py"


def _run(*args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": path} if path is not None else None
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_missing_ssh_key_is_named(tmp_path):
    proc = _run("--kubeconfig", str(tmp_path / "kc"), "--ssh-key", str(tmp_path / "nope.pub"))
    assert proc.returncode == 2
    assert "no ssh public key" in proc.stderr


def test_missing_tools_are_named_before_anything_runs(tmp_path):
    key = tmp_path / "id.pub"
    key.write_text("ssh-ed25519 AAAA test\n")
    proc = _run("--kubeconfig", str(tmp_path / "kc"), "--ssh-key", str(key), path=str(tmp_path))
    assert proc.returncode == 1
    assert "not found on PATH: kubectl, helm" in proc.stderr
    assert "+ " not in proc.stdout  # no command was run


def test_a_user_without_a_key_gets_one_made_in_the_state_directory(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("quickstart", SCRIPT)
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ssh/id_*.pub
    args = quickstart.parse_args(["up", "--state-dir", str(tmp_path / "state")])
    assert args.ssh_key == tmp_path / "state" / "id_ed25519.pub"
    assert args.ssh_key.read_text().startswith("ssh-ed25519 ")
    again = quickstart.parse_args(["up", "--state-dir", str(tmp_path / "state")])
    assert again.ssh_key.read_text() == args.ssh_key.read_text()  # made once, then reused


def test_an_operator_setting_is_read_as_helm_reads_set():
    """The VM node gets the operator image (the cgroup delegate's) when the delegate is on, however
    the setting was written: among other pairs, in capitals, or set twice."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("quickstart", SCRIPT)
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    key = "cgroupDelegate.enabled"
    assert quickstart.operator_setting(["a=1,cgroupDelegate.enabled=True"], key) == "True"
    assert quickstart.operator_setting(["cgroupDelegate.enabled=true", "cgroupDelegate.enabled=false"], key) == "false"
    assert quickstart.operator_setting(["cgroupDelegate.enabledX=true", "x.cgroupDelegate.enabled=true"], key) == ""
