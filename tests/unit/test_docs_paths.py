"""No stale pointer in the docs: every repository path README.md, docs/*.md and the charts' READMEs
name exists: in backticks (`soperator/render/worker.py`, `tests/kube/`, a bare `layout.py`), in a
code block (a layout's `soperator/reconcile/  … (plan.py)` is soperator/reconcile/plan.py), or in
prose. Links and their anchors: tests/unit/test_docs_links.py. Reads files only: fast and deterministic."""
from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from tests.support_paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "charts").glob("*/README.md"))]
# A path that starts with one of these is the repository's.
TOP = ("soperator", "tests", "charts", "docs", "bench", "images", "examples", "spank_chroot", "crds", ".ci")
# A bare file name (no directory) with one of these endings must be a file somewhere in the repository:
# docs name modules by their file name once the directory is clear from the sentence.
BARE_SUFFIXES = (".py", ".c", ".h", ".md", ".j2")
# Names that look like ours and are not: upstream's sources the docs quote (Slurm's, OpenSSH's, Nebius
# Soperator's), and where the kubelet finds the Pyxis workers' seccomp profile on a node.
NOT_OURS = {"proc_req.c", "acct_policy.c", "auth-pam.c", "chroot.c", "soperator/pyxis-worker-<digest>.json"}
FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
PATH_TOKEN = re.compile(r"(?<![\w./-])((?:%s)/[\w./*<>{}-]*)" % "|".join(re.escape(t) for t in TOP))
BARE_NAME = re.compile(r"(?<![\w./-])([\w-]+(?:%s))(?![\w/-])" % "|".join(re.escape(s) for s in BARE_SUFFIXES))


@lru_cache(maxsize=1)
def _repository_files() -> frozenset[str]:
    """Tracked and untracked (not ignored) files: what a checkout of this tree holds (every file but
    .git's and the venv's where this is no git checkout)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        return frozenset(line for line in listed.stdout.splitlines() if (ROOT / line).exists())
    return frozenset(str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                     if p.is_file() and not {".git", ".venv"} & set(p.relative_to(ROOT).parts))


@lru_cache(maxsize=1)
def _bare_names() -> frozenset[str]:
    return frozenset(Path(p).name for p in _repository_files())


def _exists(path: str) -> bool:
    """A file or directory of the repository; `<x>`, `{a,b}` and `*` stand for any name."""
    path = path.rstrip("/.,:;")
    if not path or "..." in path or "…" in path:
        return True
    pieces = re.split(r"<[^>]*>|\{[^}]*\}|\*", path)
    if len(pieces) > 1:
        regex = re.compile("[^/]*".join(map(re.escape, pieces)) + "(/.*)?$")
        return any(regex.match(f) for f in _repository_files())
    return (ROOT / path).exists()


def _repository_path(text: str) -> str | None:
    """The repository path a code span names, if it is one: `soperator/x.py`, `tests/kube/`, a bare
    `layout.py`; not a command, an option, a URL or a path inside a pod (`/etc/slurm`)."""
    text = text.strip()
    if " " in text or ":" in text or text.startswith(("/", "-", "~", "$")):
        return None
    if text.split("/", 1)[0] in TOP and "/" in text:
        return text
    if "/" not in text and text.endswith(BARE_SUFFIXES) and re.fullmatch(r"[\w.-]+", text):
        return text
    return None


def problems(doc: Path, text: str | None = None) -> list[str]:
    """Each missing path one doc names, as `doc:line: what`; `text`: the doc's text, read from `doc`
    unless given."""
    out = []
    where = doc.relative_to(ROOT)
    fenced, plain, folder = False, False, None
    for number, line in enumerate((doc.read_text() if text is None else text).splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            plain = fenced and not line.strip("`~ ")  # a block of no language: a layout, a listing
            continue
        if fenced and plain:
            # A layout: `dir/   what it holds (a.py, b.py)`; an entry's bare names are in the last folder
            # it named (continuation lines are indented).
            folder = folder if line[:1].isspace() else None
            names = []
            for token in sorted([*PATH_TOKEN.finditer(line), *BARE_NAME.finditer(line)], key=lambda m: m.start()):
                name = token.group(1)
                if "/" in name:
                    names.append(name)
                    folder = name if name.endswith("/") else folder
                else:
                    names.append(folder + name if folder else name)
        elif fenced:
            # Commands and manifests name users' files too (`train.py`): only paths of ours.
            names = [m.group(1) for m in PATH_TOKEN.finditer(line)]
        else:
            names = [p for m in CODE_SPAN.finditer(line) if (p := _repository_path(m.group(2)))]
            names += [p for m in PATH_TOKEN.finditer(CODE_SPAN.sub("", LINK.sub("", line))) for p in [m.group(1)]
                      if "/" in p.rstrip("/")]
        for name in names:
            if name in NOT_OURS:
                continue
            if "/" not in name:
                if name not in _bare_names():
                    out.append(f"{where}:{number}: names `{name}`, no file of that name in the repository")
            elif not _exists(name):
                out.append(f"{where}:{number}: names `{name}`, which does not exist")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc):
    found = problems(doc)
    assert not found, "stale pointers:\n" + "\n".join(found)


def test_the_checker_finds_each_kind_of_stale_path():
    text = ("See `soperator/render/paths.py`, `slurm_nodes.py` and soperator/gone.py; `soperator/render/worker.py`,\n"
            "`layout.py`, `charts/slurm-operator/files/seccomp/pyxis-worker-<digest>.json`, `/etc/slurm`,\n"
            "`python -m images.build`, `localhost/soperator/worker:1` and [a link](soperator/nowhere.py) are not.\n"
            "```\nsoperator/nowhere/     gone\nsoperator/render/     here; worker.py and paths.py\n"
            "                      a continuation: configs.py, slurm_nodes.py\n```\n"
            "```sh\npython train.py   # a user's file\n```\n")
    found = problems(ROOT / "docs" / "imagined.md", text)
    names = [line.split("`")[1] for line in found]
    assert names == ["soperator/render/paths.py", "slurm_nodes.py", "soperator/gone.py", "soperator/nowhere/",
                     "soperator/render/paths.py", "soperator/render/slurm_nodes.py"], found
