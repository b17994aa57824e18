"""soperator reads a manifest as kubectl does: the same JSON for every document kubectl's converter
(sigs.k8s.io/yaml, the real one, built from Go modules, in its strict mode: a repeated key is an error,
where kubectl itself keeps the last value) turns into JSON, and an error wherever it refuses one.
Unusual but valid files stay accepted."""
from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soperator import kubeyaml
from soperator.api import parse_cluster
from tests.support.kubectl_yaml import kubectl_yaml  # noqa: F401 (fixture)
from tests.support_paths import GOOD_CRS, ROOT

# Plain scalars where YAML 1.1, YAML 1.2 and go-yaml v2 part ways, and their neighbours.
WORDS = ["y", "Y", "n", "N", "yes", "No", "on", "OFF", "true", "False", "null", "~", "Null", "", ".inf", "-.Inf",
         ".nan", "1:30:00", "190:20:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "0o17", "017", "08", "0b101",
         "-0b11", "0x1F", "0x_1F", "1_000", "1__0", ".5", ".0_0", "._5", ".5e1_0", "1.", "+.5e+3", "1e3", "1e400", "1e-400", "-0", "+12",
         "0", "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616", "1e21",
         "123456789012345678901", "2.0", "0.1", "=", "<<", "0o", "0x", "+", "-", ".", "1e", "e3", "1.5Gi", "64Mi"]
NUMBERISH = st.from_regex(r"\A[-+]?(0[xXoObB])?[0-9_]{0,5}(\.[0-9]{0,3})?([eE][-+]?[0-9]{1,3})?\Z")
TOKEN = st.text(alphabet="0123456789+-._:eExXoObBinfaNyY~", min_size=1, max_size=8).filter(
    lambda t: not t.startswith(("-", ":")) and not t.endswith(":") and "::" not in t)
SCALAR = st.one_of(st.sampled_from(WORDS), NUMBERISH, TOKEN)


def _document(pairs: list[tuple[str, str]]) -> str:
    return "".join(f"{key}: {value}\n" for key, value in pairs)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.tuples(st.one_of(st.sampled_from(["a", "b", "c"]), SCALAR), SCALAR), min_size=1,
                         max_size=6), min_size=1, max_size=20))
def test_scalars_keys_and_repeats_read_as_kubectl_reads_them(kubectl_yaml, documents):  # noqa: F811
    texts = [_document(pairs) for pairs in documents]
    for text, (kind, expected) in zip(texts, kubectl_yaml(texts)):
        try:
            ours = ("json", kubeyaml.load(text))
        except kubeyaml.ManifestError as exc:
            ours = ("error", str(exc))
        if ours[0] == "error" and "become the same JSON field" in ours[1]:
            continue  # kubectl sends one value of the two at random: soperator refuses the file
        assert ours[0] == kind, (text, ours, expected)
        if kind == "json":
            assert ours[1] == expected, text


def test_a_repeated_key_names_the_field_and_both_lines():
    with pytest.raises(kubeyaml.ManifestError) as exc:
        kubeyaml.load("spec:\n  nodeSets:\n  - name: w\n    replicas: 2\n    replicas: 3\n")
    assert exc.value.path == "spec.nodeSets[0].replicas" and "lines 4, 5" in exc.value.message
    with pytest.raises(kubeyaml.ManifestError) as exc:  # one key to Go, though JSON writes "0" and "-0"
        kubeyaml.load("0.0: a\n-0.0: b\n")
    assert "given twice" in exc.value.message


def test_two_keys_that_become_one_json_field_are_refused():
    """kubectl sends the value of either at random (Go's map order); soperator asks instead."""
    for text in ("2: a\n2.0: b\n", "true: a\n'true': b\n", "1: a\n'1': b\n"):
        with pytest.raises(kubeyaml.ManifestError) as exc:
            kubeyaml.load(text)
        assert "same JSON field" in exc.value.message and "lines 1, 2" in exc.value.message


def test_an_alias_bomb_is_refused_from_the_nodes_written_not_their_expansion(monkeypatch):
    """Aliases nested ten levels deep stand for 10^10 values: the expansion is counted from the nodes
    written (each once), so nothing is built or walked beyond them, and the error says what it is."""
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)) + "spec: {features: *a9}\n"
    built = []
    construct = kubeyaml._Loader.construct_object
    monkeypatch.setattr(kubeyaml._Loader, "construct_object", lambda self, node, deep=False: (
        built.append(node), construct(self, node, deep))[1])
    with pytest.raises(kubeyaml.ManifestError) as exc:
        kubeyaml.load(text)
    assert exc.value.path == "<root>" and "YAML aliases expand the document" in exc.value.message
    assert built == []  # refused before any value was built


def test_an_alias_inside_its_own_anchor_is_refused():
    with pytest.raises(kubeyaml.ManifestError) as exc:
        kubeyaml.load("a: &a [1, *a]\n")
    assert "inside its own anchor" in exc.value.message


def test_a_merge_key_applies_where_it_stands_as_in_kubectl():
    """go-yaml v2 (kubectl, not strict) merges in the order written: a `<<` after an explicit key
    overrides it, one before it is overridden; of a list of merged mappings the first wins."""
    base = "b: &b {k: 1, j: 1}\nc: &c {k: 3, m: 3}\n"
    assert kubeyaml.load(base + "x:\n  k: 2\n  <<: *b\n")["x"] == {"k": 1, "j": 1}
    assert kubeyaml.load(base + "x:\n  <<: *b\n  k: 2\n")["x"] == {"k": 2, "j": 1}
    assert kubeyaml.load(base + "x:\n  k: 2\n  <<: [*b, *c]\n")["x"] == {"k": 1, "j": 1, "m": 3}
    with pytest.raises(kubeyaml.ManifestError):
        kubeyaml.load("x:\n  <<: 5\n")


def test_nesting_deeper_than_any_slurm_cluster_is_refused_without_recursion():
    for text in ("a: " + "[" * 5000 + "]" * 5000, "a:\n" + "- " * 5000 + "1\n"):
        with pytest.raises(kubeyaml.ManifestError) as exc:
            kubeyaml.load(text)
        assert exc.value.path == "<root>" and "nested more than" in exc.value.message


@pytest.mark.parametrize("path", GOOD_CRS, ids=lambda p: p.name)
def test_unusual_but_valid_files_are_accepted(path):
    proc = subprocess.run([sys.executable, "-m", "soperator.cli", "validate", "-f", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.startswith("ok: "), proc.stderr


def test_valid_files_mean_what_kubectl_sends(kubectl_yaml):  # noqa: F811
    """The words file's yes/off/2.0/0x10/1e3 and the unquoted 1:30:00 become what kubectl sends."""
    # kubectl converts a file one document at a time.
    texts = {f"{p.name}[{i}]" if i else p.name: doc for p in GOOD_CRS for i, doc in enumerate(p.read_text().split("\n---\n"))}
    sent = dict(zip(texts, kubectl_yaml(list(texts.values()))))
    for name, text in texts.items():
        assert sent[name] == ("json", kubeyaml.load(text)), name
    words = parse_cluster(kubeyaml.load(texts["yaml-words-as-kubectl-reads-them.yaml"])).spec
    assert (words.maintenance, words.login.allow_forwarding, words.login.replicas) == (False, True, 2)
    assert (words.node_sets[0].replicas, words.node_sets[0].real_memory_mib) == (16, 1000)
    assert parse_cluster(kubeyaml.load(texts["max-time-unquoted.yaml"])).spec.partitions[0].max_time == "1:30:00"
