"""The malformed-manifest corpus (tests/data/bad_crs/): each file starts with header lines

    # expect-error-at: spec.x.y          the field soperator's error names (required)
    # class: injection                   which class of bad input it stands for (see docs/validation.md)
    # api-server: accepts: why           the CRD schema cannot say the rule; the operator refuses it
    # api-server: refuses-unnamed: why   refused before any field is looked at (size, no name)
    # api-server: file-only: why         a defect of the file that kubectl does not send on (it
                                         sends the last of two repeated keys): soperator refuses
                                         the file; the apiserver and the operator never see it
    # api-error-at: spec.x               where the apiserver's message points, when not the same field

With no `api-server` line the apiserver must refuse the file naming the field.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support_paths import BAD_CRS


@dataclass(frozen=True)
class Case:
    path: Path
    error_at: str
    klass: str
    api: str          # "refuses", "accepts", "refuses-unnamed" or "file-only"
    api_error_at: str

    @property
    def name(self) -> str:
        return self.path.stem


def _case(path: Path) -> Case:
    headers = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        headers[key] = value.strip()
    assert "expect-error-at" in headers, f"{path.name} lacks its expect-error-at header"
    api = headers.get("api-server", "refuses").split(":", 1)[0]
    assert api in ("refuses", "accepts", "refuses-unnamed", "file-only"), f"{path.name}: api-server {api!r}"
    return Case(path, headers["expect-error-at"], headers.get("class", ""), api,
                headers.get("api-error-at", headers["expect-error-at"]))


CASES = [_case(p) for p in BAD_CRS]
