"""Slurm's config-file line grammar, read back the way slurmctld's parser reads it (s_p_parse_file /
s_p_parse_line): a '#' not escaped by '\\' starts a comment, a '\\' ending a line joins the next one,
whitespace separates `Key=Value` pairs, and a double quote keeps whitespace inside a value. Used to
check that what we render holds exactly the keys we meant, whatever a user wrote in a field."""
from __future__ import annotations

import re

_PAIR = re.compile(r'\s*([^\s=]+)(?:=("[^"]*"|\S*))?')


def _strip_comment(line: str) -> str:
    for i, char in enumerate(line):
        if char == "#" and (i == 0 or line[i - 1] != "\\"):
            return line[:i]
    return line


def logical_lines(text: str) -> list[str]:
    lines, pending = [], ""
    for raw in text.split("\n"):
        line = pending + _strip_comment(raw)
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line.strip():
            lines.append(line)
    if pending.strip():
        lines.append(pending)
    return lines


def parse(text: str) -> list[list[tuple[str, str]]]:
    """Each logical line as its (key, value) pairs, in order; a bare word is (word, '')."""
    parsed = []
    for line in logical_lines(text):
        pairs, pos = [], 0
        while pos < len(line.rstrip()):
            match = _PAIR.match(line, pos)
            pairs.append((match[1], (match[2] or "").strip('"')))
            pos = match.end()
        parsed.append(pairs)
    return parsed
