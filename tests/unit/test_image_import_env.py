"""The image cache's imports get mksquashfs's options from the pod (render/worker.py bounds its caches)."""
from __future__ import annotations

from soperator.node.image_cache import import_env
from soperator.node.layout import ENV


def test_the_pods_mksquashfs_options_override_enroot_conf_and_nothing_else_comes_from_the_pod():
    pod = {ENV.image_import_squash_options: "-comp zstd -mem 128M", "PYTHONPATH": "/x", "ENROOT_DATA_PATH": "/y"}
    assert import_env(pod) == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                               "ENROOT_SQUASH_OPTIONS": "-comp zstd -mem 128M"}
    assert "ENROOT_SQUASH_OPTIONS" not in import_env({})  # an older pod: enroot.conf's own
