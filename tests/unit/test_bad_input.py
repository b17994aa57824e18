"""The malformed-manifest corpus: each file is rejected, the error names the field, nothing renders."""
import subprocess
import sys

import pytest
import yaml

from soperator.api import SpecError, parse_cluster
from tests.support_paths import BAD_CRS, ROOT


def _expected_path(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect-error-at: "), f"{path.name} lacks its expectation header"
    return first.split(": ", 1)[1].strip()


def test_corpus_is_large_enough():
    assert len(BAD_CRS) >= 25


@pytest.mark.parametrize("path", BAD_CRS, ids=lambda p: p.stem)
def test_rejected_with_the_field_named(path):
    with pytest.raises(SpecError) as exc:
        parse_cluster(yaml.safe_load(path.read_text()))
    paths = [e.path for e in exc.value.errors]
    assert _expected_path(path) in paths, exc.value
    assert all(e.message for e in exc.value.errors)


@pytest.mark.parametrize("path", BAD_CRS[:5] + BAD_CRS[-5:], ids=lambda p: p.stem)
def test_cli_renders_nothing_and_exits_nonzero(path, tmp_path):
    for command in (["render", "--no-secrets"], ["validate"]):
        proc = subprocess.run([sys.executable, "-m", "soperator.cli", *command, "-f", str(path)],
                              capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 1
        assert proc.stdout == ""
        assert _expected_path(path) in proc.stderr


def test_cli_reports_unparseable_yaml(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("spec: [unclosed\n")
    proc = subprocess.run([sys.executable, "-m", "soperator.cli", "validate", "-f", str(bad)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "broken.yaml" in proc.stderr and proc.stdout == ""
