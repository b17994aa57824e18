"""The image cache of Pyxis workers (pyxis.imageCache) on real slurmd 26.05, Pyxis, enroot and a real
registry (CNCF Distribution, built from Go modules, on the host side of the test's network): registry
images are imported once per worker by root's daemon and mounted from its cache for every user.

Two users start the same docker:// image at once: one import, both run it, and neither user's own
enroot directories hold a layer of it. A cached file changed behind the cache's back is refused and
imported again. A worker whose node-local volume is smaller than the image says so to the user and
keeps nothing of the attempt."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from images.podman import podman
from tests.cluster.controlplane import free_port
from tests.support.e2e_cluster import running, start_with_sessions
from tests.support.enroot_host import bookworm_image
from tests.support.image_registry import Registry
from tests.support.ssh_session import run as _run

pytestmark = pytest.mark.e2e
HOST = "registry.e2e.test"
PYXIS = {"enabled": True, "enrootConfig": {"ENROOT_ALLOW_HTTP": "yes"}}
NODE_SETS = [{"name": "box", "replicas": 1, "pyxis": PYXIS}, {"name": "small", "replicas": 1, "pyxis": PYXIS}]
# The small worker's node-local volume (/run/enroot): room for a layer, not for the unpacked image.
SMALL_VOLUME = "80m"
# Root's change of one byte of a file (inverted, so it always differs), its mode put back after.
FLIP_A_BYTE = """
import os, sys
path = sys.argv[1]
os.chmod(path, 0o644)
with open(path, "r+b") as fh:
    fh.seek(4096)
    byte = fh.read(1)[0]
    fh.seek(4096)
    fh.write(bytes([byte ^ 0xFF]))
os.chmod(path, 0o444)
"""


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path, nodeSets=NODE_SETS, plugStack={"pyxis": {"mountImages": True}})


@pytest.fixture
def registry(cluster, tmp_path):
    """The registry on the host side of the cluster's network, its name served by the network's DNS,
    Debian 12 pushed into it; yields the image's docker:// reference."""
    port = free_port()
    registry = Registry(tmp_path / "registry", cluster.dns.gateway(), port)
    registry.start()
    try:
        cluster.dns.add(HOST, registry.address)
        registry.push(bookworm_image(tmp_path), "bookworm:12")
        yield f"docker://{HOST}:{port}/bookworm:12"
    finally:
        registry.stop()


@pytest.fixture
def small_volume(cluster):
    """The small worker's emptyDir, a tmpfs of SMALL_VOLUME: where it keeps enroot's files."""
    path = cluster.store.root / "empty" / "e2e-small-0" / "enroot"
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_VOLUME},mode=0777", "soperator-e2e", str(path)],
                   check=True)
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def users(cluster, registry, small_volume):
    """The cluster up; alice's and bob's ssh sessions on the login node."""
    assert cluster.populate("first")["action"] == "populated"
    sessions = start_with_sessions(cluster, ["box", "small"], {"alice": 1000, "bob": 1001})
    yield sessions
    for client in sessions.values():
        client.close()


def cache_log(cluster, worker: str) -> list[str]:
    return [line for line in podman("logs", worker).stderr.splitlines() if "image cache:" in line]


def cached_files(cluster, worker: str) -> list[str]:
    return cluster.exec(worker, "sh", "-c", "cd /run/enroot/images && stat -c '%u %a %h %n' *.sqsh 2>/dev/null "
                                            "|| true").splitlines()


def test_two_users_share_one_import_and_a_changed_entry_is_imported_again(cluster, registry, users):
    alice, bob = users["alice"], users["bob"]
    launch = (f"srun -w e2e-box-0 --container-image={registry} sh -c "
              "'grep ^VERSION_ID= /etc/os-release; stat -f -c %T /; id -un'")
    started = {user: client.exec_command(launch, timeout=600) for user, client in users.items()}
    results = {user: (streams[1].channel.recv_exit_status(), streams[1].read().decode().split(),
                      streams[2].read().decode()) for user, streams in started.items()}
    for user, (code, out, err) in results.items():
        # Debian 12 (the jail is 13), mounted from the cache under the overlay, as the user.
        assert (code, out) == (0, ['VERSION_ID="12"', "overlayfs", user]), (user, err)
    log = cache_log(cluster, "e2e-box-0")
    assert len([line for line in log if " imported in " in line]) == 1, log
    assert len([line for line in log if line.endswith(": cached")]) == 1, log
    assert {re.search(r"for (\w+)", line)[1] for line in log if " for " in line} == {"alice", "bob"}, log
    # The import above ran with its mksquashfs caches bounded, as the pod says (render/worker.py).
    assert any(line.endswith("imports' mksquashfs options: -comp lzo -noD -exit-on-error -mem 128M")
               for line in log), log
    # One file, root's, read-only, one link; neither user's enroot directories hold any of it.
    files = cached_files(cluster, "e2e-box-0")
    assert len(files) == 1 and files[0].split()[:3] == ["0", "444", "1"], files
    for uid in (1000, 1001):
        held = cluster.exec("e2e-box-0", "sh", "-c", f"find /run/enroot/user-{uid} -type f 2>/dev/null | wc -l")
        assert held.strip() == "0", uid
    # Users read it; none may write it or the directory, nor link it into a directory of theirs.
    entry = f"/run/enroot/images/{files[0].split()[3]}"
    code, out, _ = _run(bob, f"srun -w e2e-box-0 sh -c 'cat {entry} > /dev/null && echo read; "
                             f"touch /run/enroot/images/x 2>/dev/null || echo refused; "
                             f"ln {entry} /run/enroot/user-1001/kept 2>/dev/null || echo refused'")
    assert (code, out.split()) == (0, ["read", "refused", "refused"]), out

    # Root changes a byte of the cached image: the next start refuses it and imports the image again.
    cluster.exec("e2e-box-0", "python3", "-c", FLIP_A_BYTE, entry)
    code, out, err = _run(alice, launch, timeout=600)
    assert (code, out.split()) == (0, ['VERSION_ID="12"', "overlayfs", "alice"]), err
    log = cache_log(cluster, "e2e-box-0")
    assert any("refused and removed: its content changed since it was cached" in line for line in log), log
    assert len([line for line in log if " imported in " in line]) == 2, log
    assert len(cached_files(cluster, "e2e-box-0")) == 1


def test_an_image_larger_than_the_workers_volume_is_refused_and_leaves_nothing(cluster, registry, small_volume,
                                                                                   users):
    before = os.statvfs(small_volume)
    code, out, err = _run(users["alice"], f"srun -w e2e-small-0 --container-image={registry} true", timeout=600)
    assert code != 0
    assert "does not fit on this node" in err and "pyxis.storageSize" in err, err
    log = cache_log(cluster, "e2e-small-0")
    assert not any(" imported in " in line for line in log), log
    # Nothing of the attempt: no image, no import directory, no file of alice's; the space is back.
    assert cached_files(cluster, "e2e-small-0") == []
    assert cluster.exec("e2e-small-0", "ls", "-A", "/run/enroot/.image-work").split() == []
    assert cluster.exec("e2e-small-0", "sh", "-c", "find /run/pyxis/1000 /run/enroot/user-1000 -type f "
                                                   "2>/dev/null | wc -l").strip() == "0"
    after = os.statvfs(small_volume)
    assert (before.f_bfree - after.f_bfree) * after.f_frsize < 1 << 20
