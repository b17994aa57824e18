"""The image cache's files (soperator/node/image_store.py), on a real file system as root: an entry is
root's, read-only and recorded; a changed one is refused and removed; room is made by least recent use,
never by evicting an image in recent use; an image larger than the whole cache is never kept."""
from __future__ import annotations

import os
import stat

import pytest

from soperator.node.image_cache import pinned
from soperator.node.image_store import RECENT, Full, ImageStore, TooLarge

A, B, C = (f"sha256:{c * 64}" for c in "abc")
MiB = 2**20


@pytest.fixture
def store(tmp_path):
    store = ImageStore(str(tmp_path / "images"), 10 * MiB)
    store.prepare()
    return store


def staged(store: ImageStore, size: int, fill: bytes = b"x") -> str:
    """An import's result as enroot leaves it: a file in its work directory, writable."""
    path = os.path.join(store.new_work(), "image.sqsh")
    with open(path, "wb") as fh:
        fh.write(fill * size)
    return path


def test_a_published_image_is_roots_read_only_and_found_again(store):
    path, evicted = store.publish(A, staged(store, MiB), "docker://r/img:1")
    st = os.stat(path)
    assert (st.st_uid, stat.S_IMODE(st.st_mode), st.st_nlink, evicted) == (0, 0o444, 1, [])
    assert os.path.basename(path) == "a" * 64 + ".sqsh"
    assert stat.S_IMODE(os.stat(store.index).st_mode) == 0o700
    assert store.lookup(A) == (path, None)
    assert store.lookup(B) == (None, None)
    assert store.usage() == MiB


def test_an_entry_whose_content_changed_is_refused_and_removed(store):
    path, _ = store.publish(A, staged(store, MiB), "docker://r/img:1")
    os.chmod(path, 0o644)
    with open(path, "r+b") as fh:  # root rewrites one byte, then puts the mode back
        fh.seek(1000)
        fh.write(b"y")
    os.chmod(path, 0o444)
    found, refused = store.lookup(A)
    assert found is None and "content changed since it was cached" in refused.reason
    assert not os.path.exists(path) and store.entries() == {}


def test_an_entry_copied_back_unchanged_is_trusted_again_after_hashing(store):
    path, _ = store.publish(A, staged(store, MiB), "docker://r/img:1")
    data = open(path, "rb").read()
    os.unlink(path)
    with open(path, "wb") as fh:  # a new inode, the same bytes
        fh.write(data)
    os.chmod(path, 0o444)
    assert store.lookup(A) == (path, None)


@pytest.mark.parametrize("change,why", [
    (lambda p: os.chown(p, 1000, 1000), "owner 1000"),
    (lambda p: os.chmod(p, 0o666), "mode 666"),
    (lambda p: os.link(p, p + ".extra"), "2 links"),
])
def test_an_entry_that_is_no_longer_roots_read_only_file_is_refused(store, change, why):
    path, _ = store.publish(A, staged(store, MiB), "docker://r/img:1")
    change(path)
    found, refused = store.lookup(A)
    assert found is None and why in refused.reason and not os.path.exists(path)


def test_a_link_in_an_entrys_place_is_refused(store, tmp_path):
    (tmp_path / "elsewhere").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere", store.path(A))
    found, refused = store.lookup(A)
    assert found is None and "cannot open it safely" in refused.reason and not os.path.lexists(store.path(A))


def test_a_file_nobody_recorded_is_refused(store):
    with open(store.path(A), "wb") as fh:
        fh.write(b"x" * 100)
    os.chmod(store.path(A), 0o444)
    found, refused = store.lookup(A)
    assert found is None and "no record" in refused.reason


def test_room_is_made_by_least_recent_use_but_never_from_images_in_recent_use(store):
    for digest in (A, B):
        store.publish(digest, staged(store, 4 * MiB), f"docker://r/{digest[7]}")
    # Both in recent use: a third does not fit, and nothing is evicted for it.
    with pytest.raises(Full):
        store.make_room(4 * MiB)
    assert set(store.entries()) == {A, B}
    # An hour later, B used again just now: A (least recently used) goes, B stays.
    later = store.entries()[A]["last_used"] + RECENT + 3600
    store.lookup(B)
    records = store.entries()
    records[B]["last_used"] = later
    store._write_record(B, records[B])
    assert store.make_room(4 * MiB, now=later) == [A]
    assert set(store.entries()) == {B} and not os.path.exists(store.path(A))


def test_an_image_larger_than_the_whole_cache_is_never_kept(store):
    path = staged(store, 11 * MiB)
    with pytest.raises(TooLarge) as refused:
        store.publish(C, path, "docker://r/big")
    assert "11.0 MiB, more than the node set's whole image cache (10.0 MiB)" in str(refused.value)
    assert not os.path.exists(store.path(C)) and store.entries() == {}


def test_prepare_drops_what_a_previous_container_left_half_done(store):
    store.publish(A, staged(store, MiB), "docker://r/a")
    leftover = store.new_work()
    with open(store.path(B), "wb") as fh:  # an image without a record
        fh.write(b"x")
    store._write_record(C, {"image": "docker://r/c", "sha256": "0", "size": 1, "identity": [], "last_used": 0})
    works = [f".work/{name}" for name in os.listdir(store.work)]  # the import's, and one cut short
    assert f".work/{os.path.basename(leftover)}" in works
    dropped = ImageStore(store.root, store.limit).prepare()
    assert sorted(dropped) == sorted([*works, f".index/{'c' * 64}.json", f"{'b' * 64}.sqsh"])
    assert set(store.entries()) == {A} and os.listdir(store.work) == []


def test_the_import_asks_for_the_digest_the_cache_is_keyed_by():
    assert pinned("docker://reg:5000/img:12", A) == f"docker://reg:5000/img:12@{A}"
    # A digest the user gave (perhaps a multi-architecture index's) gives way to this node's manifest's.
    assert pinned(f"docker://reg#img@{B}", A) == f"docker://reg#img@{A}"
