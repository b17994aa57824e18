"""Read manifests as kubectl does, so that a file means the same here as on the apiserver.

kubectl turns YAML into JSON with sigs.k8s.io/yaml, which decodes with its copy of go-yaml v2 and
then encodes JSON. PyYAML's YAML 1.1 reads the same text differently in places that matter: `1:30:00`
is a base-60 number to it and a string to kubectl, `2001-12-14` a date, `1e3` a string where kubectl
sends 1000, `y`/`n` strings where kubectl sends booleans, `08` the string "08" where kubectl sends 8
(`017` is 15 to both). So plain scalars are resolved
here by go-yaml v2's own rules (its resolve.go), mapping keys become JSON's strings, numbers become
what Go's JSON encoder writes, and a repeated key, an unsupported tag or a document nested deeper
than any SlurmCluster is refused with the line and the field's path. A repeated key is where this
reader is stricter than kubectl: kubectl v1.31 sends the last value without a word (measured);
go-yaml's strict mode, which the tests compare with, refuses it, and so does soperator.
"""
from __future__ import annotations

import math
import re
import struct
from decimal import Decimal
from typing import Any, Iterator

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

STR, INT, FLOAT, BOOL, NULL, MERGE = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "merge"))

# go-yaml v2's table of words (resolve.go), looked up before anything else.
_WORDS: dict[str, tuple[str, Any]] = {
    **{w: (BOOL, True) for w in ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")},
    **{w: (BOOL, False) for w in ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")},
    **{w: (NULL, None) for w in ("", "~", "null", "Null", "NULL")},
    **{w: (FLOAT, math.nan) for w in (".nan", ".NaN", ".NAN")},
    **{w: (FLOAT, math.inf) for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: (FLOAT, -math.inf) for w in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
# Go's ParseFloat on a word that starts with '.': underscores only between digits.
_DOT_FLOAT = re.compile(r"^\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?$")
_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}
INT64, UINT64 = (-(2**63), 2**63 - 1), (0, 2**64 - 1)
# The deepest field of a SlurmCluster (a node set's affinity terms) is about a dozen levels down.
MAX_DEPTH = 64
# A SlurmCluster is stored in etcd, whose objects are at most ~1.5 MB. YAML aliases let a small file
# stand for a much larger document: its expanded size is counted on the parsed nodes (each node once)
# and bounded before anything walks or builds the expansion.
MAX_VALUES = 20_000
MAX_TEXT = 1_000_000


class ManifestError(ValueError):
    """A document that kubectl would not send as it reads here; `path` names the field."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def _go_parse_int(text: str, signed: bool) -> int | None:
    """strconv.ParseInt(text, 0, 64) (signed) or strconv.ParseUint(text, 0, 64): None if it fails."""
    sign, body = 1, text
    if body and body[0] in "+-":
        if not signed:
            return None
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    base = 10
    if body[:2] in ("0x", "0X"):
        base, body = 16, body[2:]
    elif body[:2] in ("0b", "0B"):
        base, body = 2, body[2:]
    elif body[:2] in ("0o", "0O"):
        base, body = 8, body[2:]
    elif body[:1] == "0" and len(body) > 1:
        base, body = 8, body[1:]
    if not body or any(c not in _DIGITS[base] for c in body):
        return None
    value = sign * int(body, base)
    low, high = INT64 if signed else UINT64
    return value if low <= value <= high else None


def _go_float(text: str) -> float | None:
    value = float(text)
    return None if math.isinf(value) else value  # Go's ParseFloat fails out of range


def resolve_plain(text: str) -> tuple[str, Any]:
    """The tag and value go-yaml v2 gives a plain (unquoted, untagged) scalar."""
    if text in _WORDS:
        return _WORDS[text]
    first = text[:1]
    if first == ".":
        value = _go_float(text.replace("_", "")) if _DOT_FLOAT.match(text) else None
        return (FLOAT, value) if value is not None else (STR, text)
    if first and (first in "+-" or first.isdigit() and first.isascii()):
        plain = text.replace("_", "")
        for signed in (True, False):
            number = _go_parse_int(plain, signed)
            if number is not None:
                return INT, number
        if _YAML_FLOAT.match(plain):
            value = _go_float(plain)
            if value is not None:
                return FLOAT, value
        # "0b…" is ParseInt's own base prefix, handled above; so is "-0b…".
    return STR, text


class _Loader(yaml.SafeLoader):
    """PyYAML's parser and composer; scalars resolved and built by go-yaml v2's rules."""

    yaml_implicit_resolvers: dict = {}

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode and implicit[0]:
            return resolve_plain(value)[0]
        return super().resolve(kind, value, implicit)

    def flatten_mapping(self, node: MappingNode) -> None:
        """Merge keys as go-yaml v2 (kubectl) applies them: in the order written, so a `<<` after an
        explicit key overrides it, and one before is overridden (PyYAML lets explicit keys win
        wherever they stand); of a list of merged mappings, the first wins."""
        pairs = []
        for key, value in node.value:
            if key.tag != MERGE or key.style is not None:
                pairs.append((key, value))
                continue
            sources = value.value if isinstance(value, SequenceNode) else [value]
            for source in reversed(sources):
                if not isinstance(source, MappingNode):
                    raise ManifestError(f"line {source.start_mark.line + 1}", "a merge key (<<) takes a mapping or a "
                                                                              "list of mappings")
                self.flatten_mapping(source)
                pairs.extend(source.value)
        node.value = pairs

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[str, Any]:
        """Keys become JSON's strings as they are read: `n` (false) and `1e-400` (0) stay two keys."""
        self.flatten_mapping(node)
        return {_json_key(self.construct_object(key, deep=deep)): self.construct_object(value, deep=deep)
                for key, value in node.value}

    def construct_scalar_value(self, node: ScalarNode) -> Any:
        """A plain scalar's value, or one whose tag is explicit (`!!int "3"`): go-yaml reads both."""
        if node.tag == STR:
            return node.value
        tag, value = resolve_plain(node.value)
        if tag == node.tag:
            return value
        if node.tag == FLOAT and tag == INT:
            return float(value)
        raise ManifestError(f"line {node.start_mark.line + 1}", f"{node.value!r} is not a {node.tag.rsplit(':', 1)[-1]}")


for _tag in (INT, FLOAT, BOOL, NULL):
    _Loader.add_constructor(_tag, _Loader.construct_scalar_value)
_Loader.add_constructor(STR, _Loader.construct_scalar_value)


def _unsupported(loader: _Loader, node: Node) -> Any:
    raise ManifestError(f"line {node.start_mark.line + 1}", f"tag {node.tag} is not supported (kubectl sends JSON)")


# `<<` is a merge key only as a key (flatten_mapping); as a value it is the string.
_Loader.add_constructor(MERGE, lambda loader, node: node.value)
for _tag in ("binary", "timestamp", "omap", "pairs", "set"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _unsupported)
_Loader.add_constructor(None, _unsupported)


def _depth_checked(text: str) -> None:
    """The parser's events are read without recursion; the composer recurses once a level."""
    loader = _Loader(text)
    try:
        depth = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ManifestError("<root>", f"nested more than {MAX_DEPTH} levels deep (line "
                                                  f"{event.start_mark.line + 1}); no SlurmCluster field is")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    finally:
        loader.dispose()


def _expanded_size(root: Node) -> None:
    """Refuse a document whose aliases expand it beyond MAX_VALUES values or MAX_TEXT characters (an
    "alias bomb"): each node's expanded size is counted once, from its children's, so the work is
    the number of nodes written, however large the expansion (kubectl's go-yaml expands it all). An
    alias inside its own anchor is refused (go-yaml: "anchor … value contains itself")."""
    sizes: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, MappingNode)
                    else list(node.value) if isinstance(node, SequenceNode) else [])
        if not children_done:
            if id(node) in on_path:
                raise ManifestError("<root>", f"an alias inside its own anchor (line {node.start_mark.line + 1}): "
                                              "it never ends")
            on_path.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        on_path.discard(id(node))
        values, text = 1, len(node.value) if isinstance(node, ScalarNode) else 0
        for child in children:
            if id(child) in on_path:
                raise ManifestError("<root>", f"an alias inside its own anchor (line {child.start_mark.line + 1}): "
                                              "it never ends")
            child_values, child_text = sizes[id(child)]
            values, text = values + child_values, text + child_text
        if values > MAX_VALUES or text > MAX_TEXT:
            raise ManifestError("<root>", f"YAML aliases expand the document to more than {MAX_VALUES:,} values or "
                                          f"{MAX_TEXT:,} characters (at line {node.start_mark.line + 1}); refused "
                                          "before it is expanded")
        sizes[id(node)] = (values, text)


def _join(path: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else str(part)


def _refuse_repeated_keys(node: Node, path: str = "") -> None:
    """A key given twice in one mapping is an error, as in go-yaml's strict mode (PyYAML and kubectl
    v1.31 keep the last value). Two different keys that JSON writes alike (`2` and `2.0`) are refused
    too: kubectl would send the value of either, at random (Go's map order)."""
    stack = [(node, path)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, MappingNode):
            by_key: dict[Any, int] = {}   # as Go compares keys: 0.0 and -0.0 are one key
            by_name: dict[str, int] = {}  # as JSON writes them: 2 and 2.0 are one field
            for key, value in node.value:
                name = None
                if isinstance(key, ScalarNode) and not (key.tag == MERGE and key.style is None):
                    identity, name = _go_key(key)
                    line = key.start_mark.line + 1
                    if identity in by_key:
                        raise ManifestError(_join(path, name), f"given twice (lines {by_key[identity]}, {line}): "
                                                               "kubectl would send the last value")
                    if name in by_name:
                        raise ManifestError(_join(path, name), "written twice, as two keys that become the same "
                                                               f"JSON field (lines {by_name[name]}, {line}): kubectl "
                                                               "would send either value, at random")
                    by_key[identity], by_name[name] = line, line
                stack.append((value, _join(path, name if name is not None else "?")))
        elif isinstance(node, SequenceNode):
            stack.extend((item, _join(path, i)) for i, item in enumerate(node.value))


def _go_key(node: ScalarNode) -> tuple[Any, str]:
    """The key as go-yaml compares keys (its Go type and value: 2 and 2.0 differ), and its JSON name."""
    tag, value = (STR, node.value) if node.tag == STR else resolve_plain(node.value)
    kind = "uint" if tag == INT and value > INT64[1] else tag
    identity = (kind, object() if isinstance(value, float) and math.isnan(value) else value)
    return identity, _json_key(value)


def _json_key(key: Any) -> str:
    """Map keys as sigs.k8s.io/yaml writes them into JSON."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int) and INT64[0] <= key <= INT64[1]:  # kubectl refuses an unsigned 64-bit key
        return str(key)
    if isinstance(key, float):
        return _go_float32_g(key)
    raise ManifestError("<root>", f"a mapping key of type {type(key).__name__} ({key!r}) cannot be JSON")


def _go_float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): the fewest digits that give the same float32 back,
    in exponent form below 1e-4 or from 1e6 up (what sigs.k8s.io/yaml does to a float key)."""
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:  # beyond float32: Go's conversion gives an infinity
        single = math.copysign(math.inf, value)
    if math.isnan(single) or math.isinf(single):
        return ".nan" if math.isnan(single) else ("-.inf" if single < 0 else ".inf")
    digits = next(p for p in range(1, 10) if struct.unpack("f", struct.pack("f", float(f"{single:.{p}g}")))[0] == single)
    exponent = int(f"{single:.{digits - 1}e}".split("e")[1])
    if exponent < -4 or exponent >= 6:
        return f"{single:.{digits - 1}e}"
    return f"{single:.{max(digits - 1 - exponent, 0)}f}"


def _as_json(value: Any, path: str = "") -> Any:
    """What Go's JSON encoder writes and its decoder reads back: a whole float below 1e21 written as
    an integer, no NaN or infinity (keys are JSON's strings already: construct_mapping)."""
    if isinstance(value, dict):
        return {k: _as_json(v, _join(path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_json(v, _join(path, i)) for i, v in enumerate(value)]
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ManifestError(path or "<root>", f"{value} has no JSON form; kubectl cannot send it")
        if value.is_integer() and abs(value) < 1e21:
            return int(Decimal(repr(value)))  # Go writes the shortest digits, then zeros
    return value


def load_all(text: str) -> Iterator[Any]:
    """Every document of a YAML (or JSON) stream, as kubectl would send it; empty documents skipped.
    Raises ManifestError, a YAML syntax error too (one line: where, and what)."""
    try:
        yield from _documents(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ManifestError("<root>", f"{where}{exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ManifestError("<root>", " ".join(str(exc).split())) from None


def _documents(text: str) -> Iterator[Any]:
    _depth_checked(text)
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _expanded_size(node)
            _refuse_repeated_keys(node)
            document = _as_json(loader.construct_document(node))
            if document is not None:
                yield document
    finally:
        loader.dispose()


def load(text: str) -> Any:
    """The one document of `text` (None if it holds none)."""
    documents = list(load_all(text))
    if len(documents) > 1:
        raise ManifestError("<root>", f"{len(documents)} documents where one was expected")
    return documents[0] if documents else None
