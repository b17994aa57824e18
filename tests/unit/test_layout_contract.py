"""The layout contract (soperator/node/layout.py) is the only place its ports, in-pod paths, label and
annotation keys and the node containers' environment names are written: a second literal of one, anywhere in soperator/ (code and templates), fails
here with its file and line. Comments and docstrings are prose and are not read; a template is read whole."""
from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

from soperator.node import layout
from tests.support_paths import ROOT

SOPERATOR = ROOT / "soperator"
LAYOUT = SOPERATOR / "node" / "layout.py"

# (file under soperator/, literal): why it is written there too. Keep it short.
ALLOWED: dict[tuple[str, str], str] = {}


def _members(namespace: type) -> dict[str, object]:
    return {k: v for k, v in vars(namespace).items() if not k.startswith("_")}


PORTS = {f"PORTS.{k}": v for k, v in _members(layout.PORTS).items()}
PATHS = {f"PATHS.{k}": v for k, v in _members(layout.PATHS).items()}
KEYS = {k: v for k, v in vars(layout).items() if k.endswith(("_LABEL", "_ANNOTATION"))}
ENV = {f"ENV.{k}": v for k, v in _members(layout.ENV).items()}


def _word(text: str) -> re.Pattern:
    """`text` standing alone: not part of a longer number, name, path or label key."""
    return re.compile(rf"(?<![\w.-]){re.escape(text)}(?![\w./-])")


PATTERNS = ([(name, str(port), re.compile(rf"(?<![\w.]){port}(?![\w.])")) for name, port in PORTS.items()]
            + [(name, path, _word(path)) for name, path in PATHS.items()]
            + [(name, key, _word(key)) for name, key in KEYS.items()]
            + [(name, var, _word(var)) for name, var in ENV.items()])
_STRING_PARTS = {tokenize.STRING} | ({tokenize.FSTRING_MIDDLE} if sys.version_info >= (3, 12) else set())


def _docstrings(text: str) -> set[tuple[int, int]]:
    """Where each docstring starts (line, column): prose, as comments are."""
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {(n.body[0].lineno, n.body[0].col_offset) for n in ast.walk(ast.parse(text)) if isinstance(n, owners)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
            and isinstance(n.body[0].value.value, str)}


def _code_parts(text: str, python: bool) -> list[tuple[int, int, str]]:
    """(first line, token type, text) of what is code: a template whole (its comments are in the
    file it renders), a Python file's numbers and strings but its docstrings."""
    if not python:
        return [(1, tokenize.STRING, text)]
    prose = _docstrings(text)
    return [(tok.start[0], tok.type, tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.NUMBER or tok.type in _STRING_PARTS and tok.start not in prose]


def literals(text: str, python: bool) -> list[tuple[int, str, str]]:
    """(line, contract name, literal) of every literal of the contract in `text`."""
    found = []
    for line, kind, part in _code_parts(text, python):
        if kind == tokenize.NUMBER:
            found += [(line, name, str(port)) for name, port in PORTS.items() if part == str(port)]
            continue
        found += [(line + part.count("\n", 0, m.start()), name, literal)
                  for name, literal, pattern in PATTERNS for m in pattern.finditer(part)]
    return sorted(found)


def _sources() -> list[Path]:
    code = [p for p in SOPERATOR.rglob("*.py") if p != LAYOUT]
    return sorted(code + [p for p in (SOPERATOR / "templates").iterdir() if p.is_file()])


def test_the_contract_is_what_the_scan_looks_for():
    assert set(PORTS.values()) >= {6817, 6818, 6819, 6820, 22, 3306}
    assert "PATHS.jail" in PATHS and "COMPONENT_LABEL" in KEYS and "CONFIG_HASH_ANNOTATION" in KEYS
    assert all(isinstance(v, int) for v in PORTS.values()) and all(isinstance(v, str) for v in PATHS.values())
    for group in (PORTS, PATHS, KEYS):
        values = list(group.values())
        assert len(values) == len(set(values)), f"one value under two names: {group}"


def test_every_port_path_and_key_is_written_once():
    seen: set[tuple[str, str]] = set()
    hits = []
    for path in _sources():
        rel = str(path.relative_to(SOPERATOR))
        for line, name, literal in literals(path.read_text(encoding="utf-8"), path.suffix == ".py"):
            if (rel, literal) in ALLOWED:
                seen.add((rel, literal))
                continue
            hits.append(f"soperator/{rel}:{line}: {literal!r} (layout.{name})")
    assert not hits, "written outside soperator/node/layout.py; import it from there instead:\n" + "\n".join(hits)
    assert seen == set(ALLOWED), f"allowed but no longer there: {set(ALLOWED) - seen}"


@pytest.mark.parametrize("text, python, expected", [
    ("x = 6817\n", True, [(1, "PORTS.slurmctld", "6817")]),
    ('x = f"{host}:6818"\n', True, [(1, "PORTS.slurmd", "6818")]),
    ("SlurmctldPort=6817\n", False, [(1, "PORTS.slurmctld", "6817")]),
    ('a = 1\nb = "/mnt/jail"\n', True, [(2, "PATHS.jail", "/mnt/jail")]),
    ('b = f"{x}/etc/enroot/enroot.conf"\n', True, [(1, "PATHS.jail_enroot_conf", "/etc/enroot/enroot.conf")]),
    ("ChrootDirectory /mnt/jail\n", False, [(1, "PATHS.jail", "/mnt/jail")]),
    ('k = {"app.kubernetes.io/component": c}\n', True, [(1, "COMPONENT_LABEL", "app.kubernetes.io/component")]),
    ('s = f"job-name={name}"\n', True, [(1, "JOB_NAME_LABEL", "job-name")]),
    # Not the contract's: comments, longer numbers and paths, a path that merely ends like one.
    ("x = 68170  # slurmctld listens on 6817 at /mnt/jail\n", True, []),
    ('x = "/mnt/jail/home"\ny = "/mnt/jailer"\nz = "/opt/mnt/jail"\n', True, []),
    ('x = "/run/slurmctld-jwt"\n', True, []),  # not /run/slurm
    ('x = "/mnt/jail"\n', False, [(1, "PATHS.jail", "/mnt/jail")]),  # quotes too, in a template
    ('"""A docstring: /mnt/jail."""\nx = """\n\nSlurmdPort=6818"""\n', True, [(4, "PORTS.slurmd", "6818")]),
])
def test_the_scan_finds_a_second_literal(text, python, expected):
    assert literals(text, python) == expected


def test_the_node_package_imports_only_itself_and_the_standard_library():
    """The images copy soperator/node as `soperator_node`, without the operator or its dependencies:
    an absolute import of soperator.* (the contract included) would fail there."""
    wrong = []
    for path in sorted((SOPERATOR / "node").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) else [])
            wrong += [f"{path.name}: {n}" for n in names
                      if n.split(".")[0] not in sys.stdlib_module_names | {"__future__"}]
    assert not wrong, f"the node package must import relatively or from the standard library: {wrong}"


# What cannot import the contract, the C plugin and the Containerfiles, must still agree with it.
_C_DEFINES = [("spank_chroot/jail.h", "SOPERATOR_NODE_USERNS_MARK", layout.PATHS.userns_mark),
              ("spank_chroot/user_dirs.h", "SOPERATOR_NODE_USER_DIRS", layout.PATHS.user_dirs_file)]
_CONTAINERFILES = [
    ("images/common/Containerfile", rf"> {re.escape(layout.PATHS.health_check)}\b"),
    ("images/common/Containerfile", rf"> {re.escape(layout.PATHS.session_limits)}\b"),
    ("images/common/Containerfile", rf"spank_chroot\.so {re.escape(layout.PATHS.chroot_plugin)}$"),
    ("images/common/Containerfile", rf"libsoperator_jail\.so {re.escape(layout.PATHS.jail_lib)}$"),
    ("images/populate_jail/Containerfile", rf"COPY --from=rootfs / {re.escape(layout.PATHS.jail_source)}$"),
    ("images/populate_jail/Containerfile",
     rf"ENV {layout.ENV.jail_source}={re.escape(layout.PATHS.jail_source)} {layout.ENV.jail}="
     rf"{re.escape(layout.PATHS.populate_target)}$"),
]


@pytest.mark.parametrize("path, name, value", _C_DEFINES, ids=[d[1] for d in _C_DEFINES])
def test_the_c_plugin_names_the_contracts_paths(path, name, value):
    text = (ROOT / path).read_text()
    assert f'#define {name} "{value}"' in text, f"{path}: {name} is not {value!r} (soperator/node/layout.py)"


@pytest.mark.parametrize("path, pattern", _CONTAINERFILES, ids=[p[1][:40] for p in _CONTAINERFILES])
def test_the_images_put_files_where_the_contract_says(path, pattern):
    assert re.search(pattern, (ROOT / path).read_text(), re.M), f"{path}: nothing matches {pattern}"
