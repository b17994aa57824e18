"""Every file in the repository that is generated from the code, and the one command that writes them
all: `soperator generate` (run from the repository root; `--check` writes nothing and lists what is
out of date). The drift tests (tests/unit/test_generated.py and the ones beside each artefact) name
this command when they fail.

- crds/slurmclusters.slurm.soperator.dev.yaml and the operator chart's copy,
  charts/slurm-operator/files/slurmclusters.slurm.soperator.dev.yaml: the CRD, from soperator/api;
- charts/slurm-cluster/values.schema.json: the cluster chart's values schema, from the same models;
- charts/slurm-cluster-storage/values.schema.json: only its PVs' `hostPath` rules (api/paths.py), the
  rest of that file is written by hand;
- charts/slurm-operator/files/seccomp/pyxis-worker-<digest>.json: the Pyxis workers' seccomp profile
  (render/seccomp_profile.py); a profile under another digest is removed.
"""
from __future__ import annotations

import json
from pathlib import Path

from soperator.api.crd import crd_yaml, values_schema_json
from soperator.api.paths import host_path_values_schema
from soperator.render.seccomp_profile import profile_file_name, profile_json

COMMAND = "soperator generate"
CRD_NAME = "slurmclusters.slurm.soperator.dev.yaml"
CRD_FILES = (f"crds/{CRD_NAME}", f"charts/slurm-operator/files/{CRD_NAME}")
CLUSTER_VALUES_SCHEMA = "charts/slurm-cluster/values.schema.json"
STORAGE_VALUES_SCHEMA = "charts/slurm-cluster-storage/values.schema.json"
# The storage chart's PersistentVolumes whose hostPath the jail's host path rule holds.
STORAGE_HOST_PATH_VOLUMES = ("jail", "controllerSpool", "accountingDatabase")
SECCOMP_DIR = "charts/slurm-operator/files/seccomp"


def _storage_values_schema(root: Path) -> str:
    """The storage chart's schema with each PV's hostPath rule the models' (the file keeps its order)."""
    schema = json.loads((root / STORAGE_VALUES_SCHEMA).read_text())
    for volume in STORAGE_HOST_PATH_VOLUMES:
        schema["properties"][volume]["properties"]["persistentVolume"]["properties"]["hostPath"] = \
            host_path_values_schema()
    return json.dumps(schema, indent=2) + "\n"


def artefacts(root: Path) -> dict[str, str]:
    """Each generated file (relative to the repository root) and the text it must hold."""
    out = {path: crd_yaml() for path in CRD_FILES}
    out[CLUSTER_VALUES_SCHEMA] = values_schema_json()
    out[STORAGE_VALUES_SCHEMA] = _storage_values_schema(root)
    out[f"{SECCOMP_DIR}/{profile_file_name()}"] = profile_json()
    return out


def stale(root: Path) -> list[str]:
    """Generated files that are missing, differ, or should be gone (a seccomp profile of an old digest)."""
    wanted = artefacts(root)
    out = [path for path, text in wanted.items()
           if not (root / path).is_file() or (root / path).read_text() != text]
    out += sorted(str(p.relative_to(root)) for p in (root / SECCOMP_DIR).glob("pyxis-worker-*.json")
                  if str(p.relative_to(root)) not in wanted)
    return out


def write(root: Path) -> list[str]:
    """Bring every generated file up to date; returns the ones it wrote or removed."""
    changed = stale(root)
    wanted = artefacts(root)
    for path in changed:
        target = root / path
        if path in wanted:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(wanted[path])
        else:
            target.unlink()
    return changed


def is_repository(root: Path) -> bool:
    return (root / "pyproject.toml").is_file() and (root / "charts").is_dir() and (root / "crds").is_dir()
