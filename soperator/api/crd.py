"""Generate the SlurmCluster CustomResourceDefinition from the pydantic models.

Kubernetes wants a *structural* OpenAPI v3 schema: no $ref, `nullable` instead of anyOf-null,
every node typed (or int-or-string), no additionalProperties:false. pydantic emits JSON Schema
2020-12, so this module rewrites it. The output is deterministic so the checked-in file can be
compared byte for byte.
"""
from __future__ import annotations

import json
from typing import Any

from soperator.api.cluster import GROUP, KIND, MAX_NAME_LENGTH, NAME_PATTERN, PLURAL, VERSION
from soperator.api.spec import MAX_STATEFUL_SET_NAME, SlurmClusterSpec
from soperator.api.status import SlurmClusterStatus
from soperator.yamlio import dump

SHORT_NAMES = ["slurm", "slc"]
# JSON-schema keywords the apiserver does not accept, or that only repeat Python-side checks.
_DROP = {"title", "$defs", "propertyNames", "patternProperties", "examples"}


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_resolve(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    if "patternProperties" in node and "additionalProperties" not in node:
        # Maps with constrained keys: Kubernetes has no patternProperties; the key rule stays Python-side.
        node = {**node, "additionalProperties": next(iter(node["patternProperties"].values()))}
    return {k: _resolve(v, defs) for k, v in node.items() if k not in _DROP}


def _structural(node: Any) -> Any:
    if isinstance(node, list):
        return [_structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    options = node.get("anyOf")
    if options and any(o == {"type": "null"} for o in options):
        rest = [o for o in options if o != {"type": "null"}]
        node.pop("anyOf")
        node = {**(rest[0] if len(rest) == 1 else {"anyOf": rest}), **node, "nullable": True}
    if node.get("default", 0) is None:
        node.pop("default")
    if node.get("additionalProperties") is False:
        node.pop("additionalProperties")
    if "const" in node:
        node["enum"] = [node.pop("const")]
    return {k: _structural(v) for k, v in node.items()}


def _apply_defaults(schema: dict[str, Any], defaults: Any) -> None:
    """Copy the models' defaults into the schema, so the apiserver fills them in on create.

    Objects get `default: {}` so the apiserver descends into them and applies nested defaults.
    """
    props = schema.get("properties")
    if not props or not isinstance(defaults, dict):
        return
    for key, sub in props.items():
        if key not in defaults:
            continue
        value = defaults[key]
        if sub.get("type") == "object" and "properties" in sub:
            sub["default"] = {}
            _apply_defaults(sub, value)
        else:
            sub["default"] = value


def _model_schema(model: type, defaults: Any) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema = _structural(_resolve(raw, raw.get("$defs", {})))
    _apply_defaults(schema, defaults)
    return schema


def openapi_schema() -> dict[str, Any]:
    spec = _model_schema(SlurmClusterSpec, SlurmClusterSpec().wire())
    spec["default"] = {}
    status = _model_schema(SlurmClusterStatus, None)
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            # Declared so that the name rules below can point at it (fieldPath).
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": spec,
            "status": status,
        },
        "x-kubernetes-validations": [{
            "rule": f"size(self.metadata.name) <= {MAX_NAME_LENGTH}", "fieldPath": ".metadata.name",
            "message": f"metadata.name must be at most {MAX_NAME_LENGTH} characters: "
                       "pod and label names are derived from it",
        }, {
            "rule": f"self.metadata.name.matches('{NAME_PATTERN}')", "fieldPath": ".metadata.name",
            "message": "metadata.name must start with a letter: Service names are derived from it",
        }, {
            "rule": "!has(self.spec.nodeSets) || self.spec.nodeSets.all(n, "
                    f"size(self.metadata.name) + 1 + size(n.name) <= {MAX_STATEFUL_SET_NAME})",
            "fieldPath": ".spec.nodeSets",
            "message": f"nodeSets: '<metadata.name>-<name>' must be at most {MAX_STATEFUL_SET_NAME} characters "
                       "(the node set's StatefulSet)",
        }],
    }


def crd() -> dict[str, Any]:
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Workers", "type": "integer", "jsonPath": ".status.workers.ready",
         "description": "ready worker pods, every node set together"},
        {"name": "Desired", "type": "integer", "jsonPath": ".status.workers.desired",
         "description": "desired worker pods, every node set together"},
        {"name": "Idle", "type": "integer", "jsonPath": ".status.slurmNodes.idle",
         "description": "Slurm nodes idle"},
        {"name": "Busy", "type": "integer", "jsonPath": ".status.slurmNodes.allocated",
         "description": "Slurm nodes fully allocated"},
        {"name": "Mixed", "type": "integer", "jsonPath": ".status.slurmNodes.mixed", "priority": 1,
         "description": "Slurm nodes partly allocated"},
        {"name": "Drained", "type": "integer", "jsonPath": ".status.slurmNodes.drained",
         "description": "Slurm nodes drained (draining ones in -o wide)"},
        {"name": "Draining", "type": "integer", "jsonPath": ".status.slurmNodes.draining", "priority": 1,
         "description": "Slurm nodes draining: running jobs, taking no more"},
        {"name": "Down", "type": "integer", "jsonPath": ".status.slurmNodes.down",
         "description": "Slurm nodes down"},
        {"name": "Login", "type": "string", "jsonPath": ".status.loginEndpoint"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        # Helm must never delete the CRD on uninstall: that would delete every SlurmCluster with it.
        "metadata": {"name": f"{PLURAL}.{GROUP}", "annotations": {"helm.sh/resource-policy": "keep"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL,
                      "singular": KIND.lower(), "shortNames": SHORT_NAMES, "categories": ["slurm"]},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": openapi_schema()},
                # No scale subresource: replicas are per node set.
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
            }],
        },
    }


def values_schema() -> dict[str, Any]:
    """values.schema.json of the slurm-cluster chart: the CRD's spec schema as JSON Schema, so bad
    values fail at `helm install/template` with the field named, before anything reaches the cluster."""
    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(n) for n in node]
        if not isinstance(node, dict):
            return node
        closed = "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields")
        props = {k: convert(v) for k, v in node.get("properties", {}).items()}  # a field may be called default
        node = {k: convert(v) for k, v in node.items()
                if not k.startswith("x-kubernetes") and k not in ("default", "properties")}
        if props:
            node["properties"] = props
        if node.pop("nullable", False) and "type" in node:
            node["type"] = [node["type"], "null"]
        if closed:
            # The apiserver would prune an unknown field without a word (helm applies no strict field
            # validation): a misspelt or removed key fails here, named.
            node["additionalProperties"] = False
        return node

    spec = convert(openapi_schema()["properties"]["spec"])
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "required": ["spec"],
        "properties": {
            "nameOverride": {"type": "string", "maxLength": MAX_NAME_LENGTH,
                             "pattern": "^([a-z]([-a-z0-9]*[a-z0-9])?)?$"},
            "spec": spec,
        },
    }


def values_schema_json() -> str:
    return json.dumps(values_schema(), indent=2, sort_keys=True) + "\n"


def crd_yaml() -> str:
    return "# Generated by `soperator crd` from soperator/api. Do not edit.\n" + dump(crd())
