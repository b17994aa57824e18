"""Kubernetes' published schemas (kubernetes_validate, strict: unknown fields refused), each schema
file parsed once per test process. The library reads and parses the JSON again on every call: about
6 ms a file, two files an object, which was more than half of the property test's time (profiled)."""
from __future__ import annotations

import functools

import kubernetes_validate
from kubernetes_validate import utils

ValidationError = kubernetes_validate.ValidationError

if not hasattr(utils.schema_contents, "cache_info"):
    # The files are package data, never written; the parsed schemas are only read by jsonschema.
    utils.schema_contents = functools.cache(utils.schema_contents)


def validate(obj: dict, version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)
