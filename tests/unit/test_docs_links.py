"""The README and docs/: every relative link and anchor leads somewhere, and the README stays short.

Links are Markdown's `[text](target)` outside fenced code blocks and inline code; http:, https: and
mailto: targets are not followed. An anchor must equal the GitHub slug of a heading in the target file.
"""

import pathlib
import re
from collections import Counter

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "charts").glob("*/README.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+).+?\1")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def prose(path):
    """The file's text with fenced code blocks and inline code blanked out (lines keep their numbers)."""
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            line = ""
        lines.append("" if fenced else INLINE_CODE.sub("", line))
    return lines


def links(path):
    text = "\n".join(prose(path))
    for match in LINK.finditer(text):  # link text may wrap onto the next line
        target = match.group(1)
        if not re.match(r"(https?|mailto):", target):
            yield text.count("\n", 0, match.start()) + 1, target


def slug(heading):
    """GitHub's: the heading as rendered (a code span's text kept, a link's text for the link),
    lowercased, all but letters, digits, `_`, `-` and spaces dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def headings(path):
    """The file's lines outside fenced code blocks, inline code kept (a heading's anchor has its text)."""
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def anchors(path):
    seen, result = Counter(), set()
    for line in headings(path):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            result.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
    return result


def rel(path):
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_relative_links_resolve(doc):
    broken = []
    for number, target in links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.is_relative_to(ROOT):
            broken.append(f"{rel(doc)}:{number}: ({target}): outside the repository")
        elif not dest.exists():
            broken.append(f"{rel(doc)}:{number}: ({target}): no file {file_part}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{rel(doc)}:{number}: ({target}): no heading with anchor #{anchor} in {rel(dest)}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= 260, f"README.md has {lines} lines (at most 260: the rest belongs in docs/)"


def test_readme_keeps_the_test_command():
    # CI's .ci/run runs the README's test command; it must stay there as given.
    block, found = None, False
    for line in README.read_text().splitlines():
        if line.strip().startswith("```"):
            block = line.strip()[3:] if block is None else None
        elif block == "sh" and line.strip() == ".venv/bin/python -m pytest":
            found = True
    assert found, "README.md no longer has the line `.venv/bin/python -m pytest` in a ```sh block"


@pytest.mark.parametrize("heading,anchor", [
    ("Container jobs (Pyxis)", "container-jobs-pyxis"),
    ("Try it: one command on a fresh Debian machine", "try-it-one-command-on-a-fresh-debian-machine"),
    ("`spec.nodeSets`: node sets", "specnodesets-node-sets"),
    ("Where [this](x.md) goes", "where-this-goes"),
])
def test_slugs_follow_githubs_rules(heading, anchor):
    assert slug(heading) == anchor
