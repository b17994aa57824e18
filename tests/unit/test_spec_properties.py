"""Property tests of the API models (hypothesis): random valid SlurmClusters are accepted and render
objects the Kubernetes schemas accept, the same each time; each known defect, put into a random valid
cluster, is refused naming its field; and no change at all, however odd, crashes the parser."""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soperator import cli, kubeyaml
from soperator.api import SpecError, parse_cluster
from soperator.render import render_all
from soperator.yamlio import dump
from tests.support.spec_strategies import DEFECTS, JSON, valid_manifests
from tests.support import k8s_schema

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@settings(SETTINGS, max_examples=60)
@given(valid_manifests())
def test_random_valid_clusters_are_accepted_and_render_valid_objects(keys, manifest):
    cluster = parse_cluster(manifest)
    # As a file: the YAML soperator writes reads back, through kubectl's reading, as the same cluster.
    assert parse_cluster(kubeyaml.load(dump(manifest))) == cluster
    objects = render_all(cluster, keys)
    assert json.dumps(objects, sort_keys=True) == json.dumps(render_all(cluster, keys), sort_keys=True)
    for obj in objects:
        k8s_schema.validate(obj, "1.35")


@settings(SETTINGS, max_examples=150)
@given(valid_manifests(), st.sampled_from(DEFECTS))
def test_each_defect_is_refused_naming_its_field(manifest, defect):
    what, change, field = defect
    with pytest.raises(SpecError) as refused:
        parse_cluster(change(manifest))
    assert field in [e.path for e in refused.value.errors], (what, refused.value)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


@settings(SETTINGS, max_examples=300)
@given(valid_manifests(), st.data())
def test_no_change_crashes_the_parser(manifest, data):
    """Any field set to any JSON value: accepted, or refused with every error naming a field."""
    manifest = copy.deepcopy(manifest)
    path = data.draw(st.sampled_from([p for p in _paths(manifest["spec"]) if p]))
    node = manifest["spec"]
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = data.draw(JSON)
    try:
        parse_cluster(kubeyaml.load(json.dumps(manifest)))
    except SpecError as refused:
        assert refused.errors and all(e.path and e.message for e in refused.errors)


# Pieces of YAML and of a SlurmCluster, strung together at random.
YAML_NOISE = st.lists(st.sampled_from(list("abcdefghijklmnopqrstuvwxyzAB019 -:{}[],&*!|>'\"#%@`?~\n\t\\.") +
                                      ["\x00", "\ufeff", "é", "\u200b", "spec", "nodeSets", "name", "  ", "- ",
                                       ": ", "\n  ", "<<: *a", "&a ", "!!int ", "1e9999"]), max_size=80).map("".join)


@settings(SETTINGS, max_examples=300)
@given(body=st.one_of(YAML_NOISE, st.binary(max_size=200), valid_manifests().map(dump)))
def test_the_cli_answers_any_file_without_a_traceback(tmp_path_factory, capsys, body):
    path = tmp_path_factory.mktemp("input") / "cluster.yaml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    code = cli.main(["validate", "-f", str(path)])
    out, err = capsys.readouterr()
    assert (code, bool(out), bool(err)) in ((0, True, False), (1, False, True)), (code, out, err)
    assert all(line.startswith("error: ") for line in err.splitlines() if line and not line.startswith(" ")), err
