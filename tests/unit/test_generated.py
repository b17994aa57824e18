"""Every generated file of the repository is what the code writes, and `soperator generate` (the one
command that writes them all) brings a drifted tree back."""
from __future__ import annotations

import shutil

from soperator import generate
from soperator.cli import main
from tests.support_paths import ROOT


def test_every_generated_file_is_up_to_date():
    stale = generate.stale(ROOT)
    assert not stale, f"out of date: {', '.join(stale)}; run `{generate.COMMAND}` from the repository's root"


def _copy(tmp_path):
    for part in ("charts", "crds"):
        shutil.copytree(ROOT / part, tmp_path / part)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_generate_brings_back_every_drifted_file_and_removes_an_old_profile(tmp_path, capsys):
    root = _copy(tmp_path)
    for path in generate.artefacts(ROOT):
        (root / path).write_text((root / path).read_text() + "\n")  # still YAML or JSON, no longer the code's
    old_profile = root / generate.SECCOMP_DIR / "pyxis-worker-000000000000.json"
    old_profile.write_text("{}\n")
    assert main(["generate", "--root", str(root), "--check"]) == 1
    out = capsys.readouterr()
    assert "out of date: crds/slurmclusters.slurm.soperator.dev.yaml" in out.out
    assert f"run `{generate.COMMAND}`" in out.err
    assert main(["generate", "--root", str(root)]) == 0
    assert "removed charts/slurm-operator/files/seccomp/pyxis-worker-000000000000.json" in capsys.readouterr().out
    assert generate.stale(root) == [] and not old_profile.exists()
    for path in generate.artefacts(ROOT):
        assert (root / path).read_text() == (ROOT / path).read_text(), path
    assert main(["generate", "--root", str(root), "--check"]) == 0


def test_the_storage_charts_host_path_rules_are_rewritten_and_the_rest_kept(tmp_path):
    root = _copy(tmp_path)
    schema = root / generate.STORAGE_VALUES_SCHEMA
    schema.write_text(schema.read_text().replace('"maxLength": 0', '"maxLength": 1'))
    assert generate.stale(root) == [generate.STORAGE_VALUES_SCHEMA]
    generate.write(root)
    assert schema.read_text() == (ROOT / generate.STORAGE_VALUES_SCHEMA).read_text()


def test_outside_the_repository_it_refuses(tmp_path, capsys):
    assert main(["generate", "--root", str(tmp_path)]) == 2
    assert "not the soperator repository" in capsys.readouterr().err
