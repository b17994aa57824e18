"""kubectl's own YAML-to-JSON converter (sigs.k8s.io/yaml, strict, as kubectl reads a file), built
from Go modules into the test's temp dir, for comparing soperator/kubeyaml.py with it."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cluster.build import BuildError, go_binary

SOURCE = Path(__file__).resolve().parent / "yamltojson"


@pytest.fixture(scope="session")
def kubectl_yaml(tmp_path_factory):
    """A function: YAML texts -> for each, ("json", value) or ("error", message)."""
    try:
        go = go_binary()
    except BuildError as exc:
        pytest.fail(str(exc))
    binary = tmp_path_factory.mktemp("yamltojson") / "yamltojson"
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "GOSUMDB": "off", "CGO_ENABLED": "0"}
    build = subprocess.run([go, "build", "-o", str(binary), "."], cwd=SOURCE, env=env, capture_output=True,
                           text=True, timeout=600)
    assert build.returncode == 0, build.stderr

    def convert(texts: list[str]) -> list[tuple[str, object]]:
        proc = subprocess.run([str(binary)], input=json.dumps(texts), capture_output=True, text=True, timeout=60,
                              check=True)
        return [("error", r["error"]) if "error" in r else ("json", r["json"]) for r in json.loads(proc.stdout)]
    return convert
