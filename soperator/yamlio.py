"""YAML output that people can read: block style for multi-line strings, sorted keys."""
from __future__ import annotations

from typing import Any, Iterable

import yaml

from soperator import kubeyaml


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # PyYAML refuses block style for lines with trailing spaces; fall back to quoting for those.
    if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()):
        return dumper.represent_scalar(kubeyaml.STR, value, style="|")
    # Quoted where kubectl would read something else (`1e3`, `y`, `08`): PyYAML quotes only what
    # YAML 1.1 would misread.
    quote = "'" if kubeyaml.resolve_plain(value)[0] != kubeyaml.STR else None
    return dumper.represent_scalar(kubeyaml.STR, value, style=quote)


_Dumper.add_representer(str, _str)


def dump_all(documents: Iterable[Any]) -> str:
    return yaml.dump_all(list(documents), Dumper=_Dumper, sort_keys=True, default_flow_style=False,
                         width=120)


def dump(document: Any) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=100)
