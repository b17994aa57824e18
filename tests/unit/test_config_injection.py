"""Property: whatever string a user puts in a field that reaches a Slurm config file, either the
models refuse it, or the rendered file parses back to exactly the lines and keys the template writes
with that string as the one value (or key) it fills. No string adds, drops or swallows a key."""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soperator.api import SpecError, parse_cluster
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from soperator.render.configs import slurm_files, sshd_files, worker_node_conf
from tests.support.slurm_grammar import parse

MARK = "Zq9mark"  # a value every field accepts and no template writes by itself
NODE_CONF = "slurmd --conf"  # what a worker registers with: a node line, parsed as Slurm parses one
BASE = {"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster", "metadata": {"name": "prop"},
        "spec": {"nodeSets": [{"name": "cpu", "replicas": 2, "gres": ["ib:8"], "features": ["fast"]}],
                 "partitions": [{"name": "main", "default": True, "nodeSets": ["cpu"],
                                 "extra": {"AllowGroups": "hpc"}},
                                {"name": "debug", "maxTime": "30"}],
                 "slurmConfig": {"extra": {"SchedulerParameters": "bf_interval=30"},
                                 "slurmctldParameters": ["idle_on_node_suspend"]},
                 "cgroupConfig": {"extra": {"AllowedRAMSpace": "100"}},
                 "plugStack": {"custom": ["optional /usr/lib/x.so a=1"]},
                 "healthCheck": {"program": "/usr/bin/check", "interval": 60}}}


def _at(spec: dict, path: tuple):
    for part in path[:-1]:
        spec = spec[part]
    return spec, path[-1]


def _set_value(doc: dict, path: tuple, value: str) -> None:
    parent, last = _at(doc["spec"], path)
    parent[last] = value


def _set_key(doc: dict, path: tuple, key: str) -> None:
    parent, last = _at(doc["spec"], path)
    parent[last] = {key: "1"}


def _set_node_set(doc: dict, path: tuple, value: str) -> None:
    """A partition names the node sets it spans: the same string in both places."""
    _set_value(doc, path, value)
    doc["spec"]["partitions"][0]["nodeSets"][0] = value


# (file, where in the spec, how the string goes in, what the MARK looks like in the file). Not here:
# slurmConfig.selectTypeParameters, a closed set of tokens (tests/data/bad_crs/slurm-select-*).
FIELDS = [
    ("slurm.conf", ("slurmConfig", "extra", "SchedulerParameters"), _set_value),
    ("slurm.conf", ("slurmConfig", "extra"), _set_key),
    ("slurm.conf", ("slurmConfig", "slurmctldParameters", 0), _set_value),
    ("slurm.conf", ("slurmConfig", "taskPlugin"), _set_value),
    ("slurm.conf", ("partitions", 0, "name"), _set_value),
    ("slurm.conf", ("nodeSets", 0, "name"), _set_node_set),
    (NODE_CONF, ("nodeSets", 0, "name"), _set_node_set),
    ("slurm.conf", ("partitions", 1, "maxTime"), _set_value),
    ("slurm.conf", ("partitions", 0, "extra", "AllowGroups"), _set_value),
    ("slurm.conf", ("partitions", 0, "extra"), _set_key),
    (NODE_CONF, ("nodeSets", 0, "features", 0), _set_value),
    (NODE_CONF, ("nodeSets", 0, "gres", 0), _set_value),
    ("slurm.conf", ("healthCheck", "program"), _set_value),
    ("cgroup.conf", ("cgroupConfig", "extra", "AllowedRAMSpace"), _set_value),
    ("cgroup.conf", ("cgroupConfig", "extra"), _set_key),
    ("plugstack.conf", ("plugStack", "custom", 0), _set_value),
]
MARKS = {("slurmConfig", "taskPlugin"): "task/zqmark", ("partitions", 1, "maxTime"): "43219",
         ("nodeSets", 0, "gres", 0): "zqmark:8", ("nodeSets", 0, "name"): "zq9mark", ("healthCheck", "program"): "/usr/bin/Zq9mark",
         ("plugStack", "custom", 0): "optional /usr/lib/Zq9mark.so"}

# Printable ASCII plus what config grammars care about: newlines, tabs, quotes, '#', '\\', '=', ','.
NASTY = st.text(st.sampled_from([chr(c) for c in range(32, 127)] + ["\n", "\r", "\t", "\v", "\\", "#", "=", " "]),
                min_size=1, max_size=24)


def _file(doc: dict, name: str) -> str | None:
    try:
        cluster = parse_cluster(doc)
    except SpecError:
        return None
    return worker_node_conf(cluster.spec.node_sets[0]) + "\n" if name == NODE_CONF else slurm_files(cluster)[name]


@pytest.mark.parametrize(("name", "path", "put"), FIELDS, ids=lambda x: ".".join(map(str, x)) if isinstance(x, tuple) else getattr(x, "__name__", x))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=NASTY)
def test_a_string_fills_exactly_its_own_slot(name, path, put, text):
    mark = MARKS.get(path, MARK)
    reference = copy.deepcopy(BASE)
    put(reference, path, mark)
    expected = _file(reference, name)
    assert expected is not None and mark in expected, "the reference value must be accepted and rendered"
    doc = copy.deepcopy(BASE)
    put(doc, path, text)
    rendered = _file(doc, name)
    if rendered is None:
        return  # refused: nothing is rendered
    want = [[(k.replace(mark, text), v.replace(mark, text)) for k, v in line] for line in parse(expected)]
    assert parse(rendered) == want


def test_the_parser_sees_an_injection_when_there_is_one():
    """The property above is only as good as the parser: it must notice each way of breaking a line."""
    base = parse("A=1 B=2\nC=3\n")
    assert parse("A=1 X=9 B=2\nC=3\n") != base       # a second key in a value
    assert parse("A=1 B=2\\\nC=3\n") != base         # a continuation swallows the next line
    assert parse("A=1 # B=2\nC=3\n") != base         # a comment drops a key
    assert parse("A=1\nX=9 B=2\nC=3\n") != base      # a newline starts a line


KEY = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
    serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


@settings(max_examples=100, deadline=None)
@given(comment=NASTY)
def test_an_authorized_key_is_one_line_whatever_its_comment(comment):
    key = KEY
    doc = copy.deepcopy(BASE)
    doc["spec"]["login"] = {"rootSshPublicKeys": [f"{key.split()[0]} {key.split()[1]} {comment}"]}
    try:
        cluster = parse_cluster(doc)
    except SpecError:
        return
    lines = sshd_files(cluster)["root_authorized_keys"].splitlines()
    assert lines == [cluster.spec.login.root_ssh_public_keys[0]] and lines[0].startswith(key.split()[0] + " ")
