"""A rebuild leaves no untagged predecessor in podman's store: kept, they filled the CI machine's disk
until the test kubelet saw disk pressure and stopped admitting pods. Tagged images and the cached
steps they were built from stay."""
from __future__ import annotations

import pytest

from images.build import IMAGES, drop_replaced_images, image_ref
from images.podman import podman, store_lock

pytestmark = pytest.mark.e2e
REF = "localhost/soperator/test-rebuild:1"


def _build(context) -> str:
    podman("build", "--layers", "-t", REF, str(context))
    return podman("image", "inspect", "--format", "{{.Id}}", REF).stdout.strip()


def _exists(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


def test_a_rebuilt_image_leaves_nothing_untagged_and_tagged_images_keep_their_cache(images, tmp_path):
    (tmp_path / "Containerfile").write_text("FROM scratch\nCOPY stamp /stamp\n")
    # The store to this test alone: another test process's build or prune would change what it counts.
    with store_lock():
        try:
            built = []
            for stamp in ("first", "second"):
                (tmp_path / "stamp").write_text(stamp)
                built.append(_build(tmp_path))
            first, second = built
            assert first != second and _exists(first)  # the replaced image lingers, untagged
            drop_replaced_images()
            assert not _exists(first)
            assert _build(tmp_path) == second  # the tagged image's steps still cached: nothing rebuilt
            assert all(_exists(image_ref(name)) for name in IMAGES)
        finally:
            podman("rmi", "--force", REF, check=False)
