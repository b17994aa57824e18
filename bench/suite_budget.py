"""Where the test suite's time goes: the seconds of each part, from a run's JUnit XML.

    PYTEST_ADDOPTS="--junitxml=/tmp/run.xml" bash .ci/run      # the README's command, unchanged
    .venv/bin/python -m bench.suite_budget /tmp/run.xml [--by module]

A part is a test folder (tests/kube, tests/e2e, ...) or, with `--by module`, a test module. Its
seconds are the sum of its tests' (set-up, call and tear-down, as pytest reports them); in a parallel
run the parts overlap, so they add up to more than the wall time, which the report also prints
(the XML's own `time`, the session's wall clock).
"""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict


def part_of(classname: str, by: str) -> str:
    """`tests.kube.test_user_path` -> `tests/kube` (by folder) or `tests/kube/test_user_path.py`."""
    pieces = classname.split(".")
    module = next((i for i, p in enumerate(pieces) if p.startswith("test_")), len(pieces) - 1)
    if by == "module":
        return "/".join(pieces[:module + 1]) + ".py"
    return "/".join(pieces[:min(module, 2)])


def budget(xml_text: str, by: str = "folder") -> tuple[dict[str, float], Counter, float]:
    """Seconds and test counts per part, and the session's wall time."""
    root = ET.fromstring(xml_text)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    seconds: dict[str, float] = defaultdict(float)
    counts: Counter = Counter()
    for case in (c for s in suites for c in s.iter("testcase")):
        part = part_of(case.get("classname", ""), by)
        seconds[part] += float(case.get("time", 0))
        counts[part] += 1
    wall = sum(float(s.get("time", 0)) for s in suites)
    return dict(seconds), counts, wall


def report(seconds: dict[str, float], counts: Counter, wall: float) -> str:
    lines = ["| part | tests | seconds |", "| --- | ---: | ---: |"]
    for part, secs in sorted(seconds.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {part} | {counts[part]} | {secs:,.0f} |")
    lines.append(f"| **sum of parts** | {sum(counts.values())} | {sum(seconds.values()):,.0f} |")
    lines.append(f"| **session wall time** | | {wall:,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("xml", help="a JUnit XML file pytest wrote (--junitxml)")
    parser.add_argument("--by", choices=("folder", "module"), default="folder")
    args = parser.parse_args(argv)
    with open(args.xml) as fh:
        print(report(*budget(fh.read(), args.by)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
