"""kubectl's own YAML-to-JSON converter (sigs.k8s.io/yaml, strict, as kubectl reads a file), built
from Go modules once and cached beside the cluster's binaries (rebuilt when its sources change), for
comparing soperator/kubeyaml.py with it."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cluster.build import BuildError, build_cached

SOURCE = Path(__file__).resolve().parent / "yamltojson"


@pytest.fixture(scope="session")
def kubectl_yaml():
    """A function: YAML texts -> for each, ("json", value) or ("error", message)."""
    try:
        binary = build_cached(SOURCE, "yamltojson")
    except BuildError as exc:
        pytest.fail(str(exc))

    def convert(texts: list[str]) -> list[tuple[str, object]]:
        proc = subprocess.run([str(binary)], input=json.dumps(texts), capture_output=True, text=True, timeout=60,
                              check=True)
        return [("error", r["error"]) if "error" in r else ("json", r["json"]) for r in json.loads(proc.stdout)]
    return convert
