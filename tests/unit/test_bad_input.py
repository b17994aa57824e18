"""The malformed-manifest corpus: each file is rejected, the error names the field, nothing renders."""
import collections
import subprocess
import sys

import pytest

from soperator import kubeyaml
from soperator.api import SpecError, parse_cluster
from soperator.api.validate import FieldError
from soperator.cli import main
from tests.support.bad_corpus import CASES
from tests.support_paths import ROOT

# The classes of bad input docs/validation.md lists ("What validation refuses"); each needs three cases or more.
CLASSES = ("injection", "managed-key", "cross-field", "path", "ssh-key", "loose-type", "size", "secret",
           "kubernetes", "slurm", "parsing", "crash", "operator-owned", "slurmd", "world-writable")


def test_corpus_covers_every_class_three_times():
    counts = collections.Counter(c.klass for c in CASES)
    assert {k: counts[k] for k in CLASSES if counts[k] < 3} == {}
    assert len(CASES) >= 150


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rejected_with_the_field_named(case):
    try:
        parse_cluster(kubeyaml.load(case.path.read_text()))
    except kubeyaml.ManifestError as exc:  # refused as kubectl refuses it, before any model
        errors = [FieldError(exc.path, exc.message)]
    except SpecError as exc:
        errors = exc.errors
    else:
        pytest.fail(f"{case.name} was accepted")
    assert case.error_at in [e.path for e in errors], errors
    assert all(e.message for e in errors)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cli_validate_refuses_naming_the_field(case, capsys):
    """`soperator validate`'s own main, in this process: a new interpreter per file cost 0.3 s each
    (70 s for the corpus); the console entry point itself is run as a process below."""
    assert main(["validate", "-f", str(case.path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{case.error_at}: " in err


@pytest.mark.parametrize("case", CASES[:5] + CASES[-5:], ids=lambda c: c.name)
def test_cli_renders_nothing(case):
    _cli_refuses(["render", "--no-secrets"], case)


def _cli_refuses(command, case):
    proc = subprocess.run([sys.executable, "-m", "soperator.cli", *command, "-f", str(case.path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert f"{case.error_at}: " in proc.stderr


def test_cli_reports_unparseable_yaml(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("spec: [unclosed\n")
    proc = subprocess.run([sys.executable, "-m", "soperator.cli", "validate", "-f", str(bad)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "broken.yaml" in proc.stderr and proc.stdout == ""


def test_render_keeps_private_keys_off_stdout_unless_asked(tmp_path):
    example = ROOT / "examples" / "minimal.yaml"
    plain = subprocess.run([sys.executable, "-m", "soperator.cli", "render", "-f", str(example)],
                           capture_output=True, text=True, cwd=ROOT)
    assert plain.returncode == 0 and "kind: Secret" not in plain.stdout and "PRIVATE KEY" not in plain.stdout
    asked = subprocess.run([sys.executable, "-m", "soperator.cli", "render", "-f", str(example), "--with-secrets",
                            "--keys-dir", str(tmp_path / "keys")], capture_output=True, text=True, cwd=ROOT)
    assert asked.returncode == 0 and "kind: Secret" in asked.stdout and "private keys" in asked.stderr
