"""Read the pip-compile lock files (requirements.txt: the operator's runtime; requirements-test.txt:
what CI installs) into {normalized name: version}."""
from __future__ import annotations

import re
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def pins(name: str) -> dict[str, str]:
    found = {}
    for line in (ROOT / name).read_text().splitlines():
        match = PIN.match(line)
        if match:
            found[canonicalize_name(match[1])] = match[2]
    return found


def unhashed(name: str) -> list[str]:
    """Pinned requirements with no --hash line under them."""
    lines = (ROOT / name).read_text().splitlines()
    return [line.split()[0] for i, line in enumerate(lines)
            if PIN.match(line) and not (i + 1 < len(lines) and "--hash=sha256:" in lines[i + 1])]
