"""The image cache's files (soperator/node/image_store.py), on a real file system as root: an entry is
root's, read-only and recorded; a changed one is refused and removed; room is made by least recent use,
never by evicting an image in recent use; an image larger than the whole cache is never kept."""
from __future__ import annotations

import os
import stat
import subprocess

import pytest

from soperator.node.image_ref import BadReference, ImageRef, parse
from soperator.node.image_store import RECENT, Full, ImageStore, TooLarge

A, B, C = (f"sha256:{c * 64}" for c in "abc")
MiB = 2**20


@pytest.fixture
def store(tmp_path):
    store = ImageStore(str(tmp_path / "images"), str(tmp_path / "work"), 10 * MiB)
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
    works = [os.path.join(store.work, name) for name in os.listdir(store.work)]  # the import's, one cut short
    assert leftover in works
    open(os.path.join(store.index, f"{'d' * 64}.json.1f2e"), "w").close()  # a record half written
    dropped = ImageStore(store.root, store.work, store.limit).prepare()
    assert sorted(dropped) == sorted([*works, f".index/{'c' * 64}.json", f"{'b' * 64}.sqsh",
                                      f".index/{'d' * 64}.json.1f2e"])
    assert set(store.entries()) == {A} and os.listdir(store.work) == []


def test_a_hit_on_a_full_volume_is_still_a_hit(store):
    """Noting its last use fails (no room for a new record file): the entry is answered all the same,
    and no half-written record is left."""
    path, _ = store.publish(A, staged(store, MiB), "r/img@sha256:…")
    record = open(os.path.join(store.index, f"{'a' * 64}.json")).read()
    # The index on a file system with room for its root and one file: the record, and nothing more.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=2,mode=0700", "soperator-test", store.index],
                   check=True)
    try:
        with open(os.path.join(store.index, f"{'a' * 64}.json"), "w") as fh:
            fh.write(record)
        assert store.lookup(A) == (path, None)
        assert os.listdir(store.index) == [f"{'a' * 64}.json"]
    finally:
        subprocess.run(["umount", store.index], check=True)


@pytest.mark.parametrize("uri,name,asked", [
    ("docker://ubuntu:24.04", "registry-1.docker.io/library/ubuntu", "docker://registry-1.docker.io#library/ubuntu:24.04"),
    ("docker://nvcr.io#nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch",
     "docker://nvcr.io#nvidia/pytorch:24.05-py3"),
    ("docker://registry.e2e.test:5000/bookworm:12", "registry.e2e.test:5000/bookworm",
     "docker://registry.e2e.test:5000#bookworm:12"),
    (f"docker://reg:5000/a/b@{B}", "reg:5000/a/b", f"docker://reg:5000#a/b@{B}"),
    ("docker://org/img", "registry-1.docker.io/org/img", "docker://registry-1.docker.io#org/img:latest"),
])
def test_an_image_reference_reads_as_enroot_reads_it(uri, name, asked):
    ref = parse(uri)
    assert (ref.name, ref.asked) == (name, asked)
    # The import fetches the digest the registry gave (enroot ignores a tag beside it).
    assert ref.pinned(A) == f"docker://{ref.registry}#{ref.repository}@{A}"


def test_the_key_is_the_repository_and_its_digest_so_no_registry_answers_for_another():
    """A registry of a user's may claim any digest for its image: it can only ever fill its own key."""
    real, claimed = parse("docker://nvcr.io#nvidia/pytorch:24.05"), parse("docker://evil.example#nvidia/pytorch:24.05")
    assert real.key(A) != claimed.key(A) and real.key(A) != parse("docker://nvcr.io#nvidia/other:1").key(A)
    assert real.key(A) == ImageRef("nvcr.io", "nvidia/pytorch", "other-tag").key(A)  # the tag is not the image


@pytest.mark.parametrize("uri", [
    "dockerd://img", "docker://alice@reg.io/img", "docker://reg.io/Img", "docker://reg.io/img:bad tag",
    "docker://reg.io/img@sha256:xyz", "docker://reg.io/../etc", "docker://reg.io/img;rm -rf", "docker://$(id)/x",
    "docker://reg.io#", "docker://-reg.io/x",
])
def test_references_outside_the_grammar_are_refused_before_anything_runs(uri):
    with pytest.raises(BadReference):
        parse(uri)
