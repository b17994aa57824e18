"""podman's configuration files, read by every podman any test worker starts, are never seen half
written: a worker's podman that read an empty containers.conf looked for its networks in the host's
directory and found none (CI, 2026-12-02)."""
import images.podman as podman_module


def test_unchanged_files_are_left_alone_and_changed_ones_replaced_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(podman_module, "PODMAN_DIR", tmp_path)
    env = podman_module.podman_env()
    conf = tmp_path / "containers.conf"
    assert env["CONTAINERS_CONF"] == str(conf)
    assert f'network_config_dir = "{tmp_path / "networks"}"' in conf.read_text()
    first = conf.stat().st_ino

    podman_module.podman_env()
    assert conf.stat().st_ino == first  # not written again: no window where a reader sees less

    conf.write_text("stale\n")
    stale = conf.stat().st_ino
    podman_module.podman_env()
    assert conf.stat().st_ino != stale  # a new file renamed over the old, never truncated in place
    assert "netavark" in conf.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["containers.conf", "storage.conf"]
