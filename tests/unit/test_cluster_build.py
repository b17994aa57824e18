"""The control-plane build fails with one readable message, not a traceback storm."""
import pytest

from tests.cluster import build


def test_missing_go_is_one_clear_message(monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    monkeypatch.setattr(build.os, "access", lambda path, mode: False)
    with pytest.raises(build.BuildError, match="Go toolchain not found"):
        build.ensure_binaries()


def test_failed_build_reports_the_compiler_error(tmp_path):
    module = tmp_path / "mod"
    (module / "cmd" / "broken").mkdir(parents=True)
    (module / "go.mod").write_text("module example.test/broken\n\ngo 1.22\n\nrequire (\n\tk8s.io/kubernetes v1.37.2\n)\n")
    (module / "go.sum").write_text("")
    (module / "cmd" / "broken" / "main.go").write_text("package main\n\nfunc main() { undefinedCall() }\n")
    with pytest.raises(build.BuildError) as exc:
        build._build(build.go_binary(), module, tmp_path / "bin", ("broken",), "./cmd/...", "")
    assert "building broken failed" in str(exc.value)
    assert "undefined: undefinedCall" in str(exc.value)
    assert not (tmp_path / "bin" / ".stamp-mod").exists()


def test_the_pinned_releases_are_read_from_go_mod():
    assert build.kubernetes_version().startswith("v1.37.")
    # User namespaces for pods need containerd 2 and runc 1.2 or newer.
    assert build.required_version(build.CONTAINERD, build.RUNTIME).startswith("v2.")
    assert build.required_version(build.RUNC, build.RUNTIME) >= "v1.2"
