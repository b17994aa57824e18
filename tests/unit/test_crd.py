"""The CRD is generated from the models: checked in without drift, structural, and it accepts the examples."""
import copy
import subprocess
import sys

import jsonschema
import pytest
import yaml

from soperator import generate
from soperator.api.crd import crd, crd_yaml
from tests.support_paths import CRD_FILE, EXAMPLES, ROOT

FORBIDDEN_KEYS = {"$ref", "$defs", "definitions", "uniqueItems", "title", "propertyNames", "patternProperties",
                  "const"}


def _schema():
    return crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _walk(node, path="$"):
    yield path, node
    for key in ("properties", "additionalProperties"):
        child = node.get(key)
        if key == "properties":
            for name, sub in (child or {}).items():
                yield from _walk(sub, f"{path}.{name}")
        elif isinstance(child, dict):
            yield from _walk(child, f"{path}[*]")
    if "items" in node:
        yield from _walk(node["items"], f"{path}[]")


def test_checked_in_crd_matches_the_models():
    assert CRD_FILE.read_text() == crd_yaml(), f"{CRD_FILE.relative_to(ROOT)} drifted from soperator/api: run " \
                                                f"`{generate.COMMAND}` (it writes every generated file)"


def test_cli_prints_the_same_crd():
    out = subprocess.run([sys.executable, "-m", "soperator.cli", "crd"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert out == crd_yaml()


def test_schema_is_structural():
    for path, node in _walk(_schema()):
        assert not FORBIDDEN_KEYS & node.keys(), (path, FORBIDDEN_KEYS & node.keys())
        assert node.get("additionalProperties") is not False, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert "anyOf" not in node and "oneOf" not in node, path
            assert "type" in node, f"{path} has no type"
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert node["type"] == "object", path


def test_maps_keep_their_value_schema():
    spec = _schema()["properties"]["spec"]["properties"]
    extra = spec["slurmConfig"]["properties"]["extra"]
    assert extra["type"] == "object" and extra["additionalProperties"]["type"] == "string"


def test_preserve_unknown_fields_only_on_affinity():
    free = [p for p, n in _walk(_schema()) if n.get("x-kubernetes-preserve-unknown-fields")]
    assert free and all(p.endswith(".scheduling.affinity") for p in free), free


def test_subresources_and_columns():
    version = crd()["spec"]["versions"][0]
    # Replicas are per node set: no single scale subresource.
    assert version["subresources"] == {"status": {}}
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns if "priority" not in c] == [
        "Phase", "Workers", "Desired", "Idle", "Busy", "Drained", "Down", "Login", "Age"]
    status = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    counts = status["properties"]["slurmNodes"]["properties"]
    for column in columns:
        path = column["jsonPath"].split(".")[1:]
        if path[0] == "status" and path[1] == "slurmNodes":
            assert path[2] in counts, column
    assert crd()["spec"]["names"]["shortNames"]


def _as_json_schema(node):
    """OpenAPI v3.0 `nullable` -> JSON Schema type unions, so jsonschema can check documents."""
    node = copy.deepcopy(node)
    if isinstance(node, dict):
        if node.pop("nullable", False) and "type" in node:
            node["type"] = [node["type"], "null"]
        for key in [k for k in node if k.startswith("x-kubernetes")]:
            node.pop(key)
        return {k: _as_json_schema(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_as_json_schema(v) for v in node]
    return node


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_validate_against_the_crd_schema(path):
    jsonschema.validate(yaml.safe_load(path.read_text()), _as_json_schema(_schema()))


@pytest.mark.parametrize("doc,message", [
    ({"spec": {"nodeSets": [{"name": "a", "replicas": -1}]}}, "minimum"),
    ({"spec": {"nodeSets": [{"replicas": 1}]}}, "'name' is a required property"),
    ({"spec": {"login": {"service": {"type": "ExternalName"}}}}, "is not one of"),
    ({"spec": {"nodeSets": [{"name": "a", "sharedMemorySize": "64 MB"}]}}, "does not match"),
])
def test_schema_rejects_bad_values(doc, message):
    with pytest.raises(jsonschema.ValidationError, match=message):
        jsonschema.validate(doc, _as_json_schema(_schema()))


def test_defaults_in_schema_match_the_models():
    spec = _schema()["properties"]["spec"]
    assert spec["default"] == {}
    assert [n["name"] for n in spec["properties"]["nodeSets"]["default"]] == ["worker"]
    assert spec["properties"]["nodeSets"]["default"][0]["replicas"] == 2
    assert spec["properties"]["partitions"]["default"] == [
        {"default": True, "extra": {}, "maxTime": "INFINITE", "name": "main", "nodeSets": [], "state": "UP"}]
