"""The podman stand-in for a kubelet cleans up after a pod that fails to start."""
from __future__ import annotations

import pytest

from images.build import build_all, image_ref
from images.podman import PodmanError, podman
from tests.support.podman_pods import VolumeStore, start_pod

pytestmark = pytest.mark.e2e


def test_a_pod_that_fails_to_start_leaves_no_container(tmp_path):
    build_all(only=["operator"])
    pod = {"containers": [{"image": image_ref("operator"), "args": ["--help"]}]}
    name = f"soperator-test-failing-{tmp_path.name}"[:60]
    with pytest.raises(PodmanError, match="sethostname"):
        # A hostname over 64 characters passes podman's checks and fails in the runtime.
        start_pod(name, pod, VolumeStore(tmp_path, {}), "host", hostname="h" * 80)
    assert podman("container", "exists", name, check=False).returncode == 1
