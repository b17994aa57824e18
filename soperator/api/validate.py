"""Turn raw SlurmCluster manifests into models, with errors that name the offending field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from soperator import kubeyaml

from soperator.api.cluster import SlurmCluster
from soperator.api.common import AtField


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class SpecError(ValueError):
    """A manifest that cannot be turned into a cluster; `errors` locates every problem."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def _message(err: dict[str, Any]) -> str:
    msg = err["msg"]
    # pydantic prefixes messages raised from our validators; the path already says where.
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    return msg


# A SlurmCluster is stored in etcd, whose objects are at most ~1.5 MB; kubeyaml bounds a file's
# expansion by the same numbers before it is built, and a manifest from elsewhere is checked here.
MAX_VALUES, MAX_TEXT = kubeyaml.MAX_VALUES, kubeyaml.MAX_TEXT


def check_size(manifest: Any) -> None:
    """Count every value as serialization would (an alias counts each time it is used), and stop at
    the bound: walking is cheap however large the expansion would be."""
    values, text, stack = 0, 0, [manifest]
    while stack:
        node = stack.pop()
        values += 1
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            text += len(node)
        if values > MAX_VALUES or text > MAX_TEXT:
            raise SpecError([FieldError("<root>", f"the manifest expands to more than {MAX_VALUES:,} values or "
                                                  f"{MAX_TEXT:,} characters (YAML aliases?); refused before use")])


# Fields whose content is free-form (the CRD keeps unknown fields there, nulls included).
FREE_FORM = frozenset({"affinity"})


def _without_nulls(node: Any) -> Any:
    """The manifest as the apiserver stores it: a null for a field is dropped, as structural pruning
    drops it (the field then takes its default; for a nullable field, null and absent mean the same
    to the models). List items and free-form fields are kept as they are."""
    if isinstance(node, dict):
        return {k: (v if k in FREE_FORM else _without_nulls(v)) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_without_nulls(v) for v in node]
    return node


def parse_cluster(manifest: Any) -> SlurmCluster:
    """Validate a manifest (dict from YAML/JSON or the apiserver); raise SpecError on any problem."""
    if not isinstance(manifest, dict):
        raise SpecError([FieldError("<root>", f"expected a mapping, got {type(manifest).__name__}")])
    check_size(manifest)
    body = {k: v for k, v in _without_nulls(manifest).items() if k != "status"}
    try:
        # The wire's field names only (camelCase), as the CRD has them: `node_sets` is unknown there.
        return SlurmCluster.model_validate(body, by_alias=True, by_name=False)
    except ValidationError as exc:
        errors = [FieldError(_path(_loc(e)), _message(e)) for e in exc.errors()]
        raise SpecError(errors) from None


def _loc(err: dict[str, Any]) -> tuple[Any, ...]:
    cause = (err.get("ctx") or {}).get("error")
    return (*err["loc"], *cause.path) if isinstance(cause, AtField) else err["loc"]
