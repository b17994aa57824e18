"""What reading files as kubectl does and the second pass of rules cost `soperator validate`.

Usage: python -m bench.validate_bench [--repeat N]. For each file (the examples and the valid but
unusual ones of tests/data/good_crs), in one run: PyYAML's safe_load against soperator's kubectl-like
reader (kubeyaml.load), and the models' validation; the ratios are the figures to compare.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import yaml

from soperator import kubeyaml
from soperator.api import parse_cluster

ROOT = Path(__file__).resolve().parent.parent
FILES = [*sorted((ROOT / "examples").glob("*.yaml")), *sorted((ROOT / "tests" / "data" / "good_crs").glob("*.*"))]


def _median_ms(work, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"{'file':<40} {'safe_load ms':>12} {'kubeyaml ms':>12} {'x safe':>7} {'validate ms':>12}")
    ratios = []
    for path in FILES:
        text = path.read_text()
        doc = kubeyaml.load(text)
        pyyaml = _median_ms(lambda: yaml.safe_load(text), args.repeat)
        ours = _median_ms(lambda: kubeyaml.load(text), args.repeat)
        models = _median_ms(lambda: parse_cluster(doc), args.repeat)
        ratios.append(ours / pyyaml)
        print(f"{path.name:<40} {pyyaml:>12.3f} {ours:>12.3f} {ours / pyyaml:>7.2f} {models:>12.3f}")
    print(f"median kubeyaml / safe_load: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
