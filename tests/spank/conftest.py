"""Fixtures of the Slurm tests in this folder."""
from __future__ import annotations

import pytest

from tests.support.thin_jail import make_thin_jail


@pytest.fixture
def jail(tmp_path):
    """A thin jail (the image's /usr bound read-only at use): what the plugin pivots job steps into."""
    return make_thin_jail(tmp_path / "jail")
