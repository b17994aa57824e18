from __future__ import annotations

import pytest

from tests.support.e2e_cluster import build_images, running


@pytest.fixture(scope="session")
def images():
    return build_images()


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path)
