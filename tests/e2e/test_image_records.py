"""Each image built has a record of its Debian packages at their exact versions, for the build it
came from (security review #7: the suites the images install from move on)."""
from __future__ import annotations

import re

import pytest

from images.build import IMAGES, PACKAGES, SLURM_RELEASE, _label, image_ref

pytestmark = pytest.mark.e2e


def test_each_image_records_its_packages_for_its_own_build(images):
    records = {}
    for name in IMAGES:
        header, *lines = (PACKAGES / f"{name}.txt").read_text().splitlines()
        # The record belongs to the image as built now: a rebuild writes a new one.
        assert header == f"# {image_ref(name)} inputs={_label(image_ref(name))}", name
        assert lines == sorted(lines) and all(re.fullmatch(r"[a-z0-9][a-z0-9+.:-]*=[^ =]+", ln) for ln in lines), name
        records[name] = dict(line.split("=", 1) for line in lines)
    assert records["worker"]["slurmd"].startswith(SLURM_RELEASE + ".")
    assert records["jail"]["slurm-client"] == records["worker"]["slurmd"]  # one Slurm everywhere
    assert "mariadb-server" in records["database"] and "python3" in records["operator"]

