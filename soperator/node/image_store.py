"""A Pyxis worker's image cache on disk: squashfs images under a sha256 key (image_cache.py: of the image's
repository and manifest digest), written by root only, read by every user of the node, within a size
limit.

<root>/<hex>.sqsh        an image: root's, 0444, one link; what Pyxis mounts or unpacks. The jail sees
                         <root> through a read-only mount of its own: no user can link to an entry
<root>/.index/<hex>.json what root recorded when it published it (root's, 0700 directory): the
                         image, the file's sha256 and its identity (inode, size, mtime, ctime)
<work>/<id>/             one import in progress (root's, 0700, beside <root>); gone after

An entry is trusted only while the file is the one root published: root's, 0444, one link (anything
else is refused at once), and the same inode, size, mtime and ctime (ctime cannot be set back, by
anyone); a file with another identity is hashed again, and refused if its content no longer matches
its record. A refused entry is removed, and the image imported again.
Users cannot write here at all (the directories are root's, 0755): tampering means root, or the disk.

Full: the least recently used entries go first, but none used in the last RECENT seconds (a step may
be between the cache's answer and its `enroot create`); an image larger than the whole limit is never
kept (TooLarge). Standard library only (this runs in the node image, as soperator_node)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import time
import uuid
from dataclasses import dataclass

from .image_ref import DIGEST

RECENT = 600.0
HASH_CHUNK = 1 << 20


class TooLarge(RuntimeError):
    pass


class Full(RuntimeError):
    """Every entry that could make room was used within RECENT seconds."""


@dataclass(frozen=True)
class Refused:
    digest: str
    reason: str


def _hex(digest: str) -> str:
    if not DIGEST.fullmatch(digest):
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return digest.removeprefix("sha256:")


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def sha256_of_file(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return sha256_of(fd)
    finally:
        os.close(fd)


def sha256_of(fd: int) -> str:
    digest = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, HASH_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def human(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


class ImageStore:
    def __init__(self, root: str, work: str, limit: int):
        self.root, self.work, self.limit = root, work, limit
        self.index = os.path.join(root, ".index")

    def prepare(self) -> list[str]:
        """Make the directories root's with their modes, and drop what a previous container left half
        done (imports in progress, index records without an image, images without a record)."""
        for path, mode in ((self.root, 0o755), (self.index, 0o700), (self.work, 0o700)):
            os.makedirs(path, exist_ok=True)
            os.chown(path, 0, 0)
            os.chmod(path, mode)
        dropped = [os.path.join(self.work, name) for name in os.listdir(self.work)]
        for name in os.listdir(self.work):
            shutil.rmtree(os.path.join(self.work, name), ignore_errors=True)
        for name in os.listdir(self.index):  # a record half written
            if not name.endswith(".json"):
                os.unlink(os.path.join(self.index, name))
                dropped.append(f".index/{name}")
        recorded = {name[:-5] for name in os.listdir(self.index) if name.endswith(".json")}
        present = {name[:-5] for name in os.listdir(self.root) if name.endswith(".sqsh")}
        for hex_ in recorded - present:
            os.unlink(os.path.join(self.index, f"{hex_}.json"))
            dropped.append(f".index/{hex_}.json")
        for hex_ in present - recorded:
            os.unlink(os.path.join(self.root, f"{hex_}.sqsh"))
            dropped.append(f"{hex_}.sqsh")
        return dropped

    def path(self, digest: str) -> str:
        return os.path.join(self.root, f"{_hex(digest)}.sqsh")

    def _record_path(self, digest: str) -> str:
        return os.path.join(self.index, f"{_hex(digest)}.json")

    def _record(self, digest: str) -> dict | None:
        try:
            with open(self._record_path(digest), encoding="utf-8") as fh:
                return json.load(fh)
        except (FileNotFoundError, ValueError):
            return None

    def _write_record(self, digest: str, record: dict) -> None:
        tmp = f"{self._record_path(digest)}.{uuid.uuid4().hex}"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(record, fh)
            os.replace(tmp, self._record_path(digest))
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def lookup(self, digest: str) -> tuple[str | None, Refused | None]:
        """(path, None) for a trusted entry (its last use noted); (None, Refused) for one that was
        there and is not what root published (removed); (None, None) for none."""
        path, record = self.path(digest), self._record(digest)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None, None
        except OSError as exc:  # a link or another kind of file in its place
            return None, self._refuse(digest, f"cannot open it safely: {exc.strerror}")
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or stat.S_IMODE(st.st_mode) != 0o444 \
                    or st.st_nlink != 1:
                return None, self._refuse(digest, f"not root's read-only file any more (owner {st.st_uid}, "
                                          f"mode {stat.S_IMODE(st.st_mode):o}, {st.st_nlink} links)")
            if not isinstance(record, dict) or not {"identity", "sha256", "size"} <= set(record):
                return None, self._refuse(digest, "no record of publishing it")
            if _identity(st) != record["identity"]:
                # Changed since root published it (or copied back): only its content can tell.
                found = sha256_of(fd)
                if found != record["sha256"]:
                    return None, self._refuse(digest, f"its content changed since it was cached (sha256 "
                                              f"{found[:12]}…, recorded {record['sha256'][:12]}…)")
                record["identity"] = _identity(st)
        finally:
            os.close(fd)
        record["last_used"] = time.time()
        with contextlib.suppress(OSError):  # a full volume: the entry is still good, its age stays
            self._write_record(digest, record)
        return path, None

    def _refuse(self, digest: str, reason: str) -> Refused:
        self.remove(digest)
        return Refused(digest, reason)

    def remove(self, digest: str) -> None:
        """An entry gone; a step that has it open (squashfuse) keeps reading its inode."""
        for path in (self.path(digest), self._record_path(digest)):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def entries(self) -> dict[str, dict]:
        found = {}
        for name in os.listdir(self.index):
            if name.endswith(".json"):
                record = self._record(f"sha256:{name[:-5]}")
                if isinstance(record, dict) and isinstance(record.get("size"), int):
                    found[f"sha256:{name[:-5]}"] = record
        return found

    def usage(self) -> int:
        return sum(record["size"] for record in self.entries().values())

    def new_work(self) -> str:
        """A directory for one import, root's alone."""
        path = os.path.join(self.work, uuid.uuid4().hex)
        os.mkdir(path, 0o700)
        return path

    def make_room(self, size: int, now: float | None = None) -> list[str]:
        """Evict least recently used entries until `size` more bytes fit; returns the digests evicted.
        TooLarge: larger than the whole limit; Full: only entries in recent use could make room."""
        if size > self.limit:
            raise TooLarge(f"{human(size)}, more than the node set's whole image cache ({human(self.limit)})")
        now = time.time() if now is None else now
        entries = sorted(self.entries().items(), key=lambda item: item[1]["last_used"])
        used = sum(record["size"] for _, record in entries)
        evicted = []
        for digest, record in entries:
            if used + size <= self.limit:
                break
            if now - record["last_used"] < RECENT:
                continue
            self.remove(digest)
            used -= record["size"]
            evicted.append(digest)
        if used + size > self.limit:
            raise Full(f"{human(size)} does not fit: {human(used)} of {human(self.limit)} are images used in "
                       f"the last {RECENT / 60:.0f} minutes")
        return evicted

    def publish(self, digest: str, staged: str, image: str, sha256: str | None = None) -> tuple[str, list[str]]:
        """Make the imported file `staged` the entry of `digest`: root's, 0444, recorded with its sha256
        (`sha256`, when the caller hashed it already). Returns (its path, digests evicted to make room
        for it). The caller has made sure nothing of the import still runs (it could otherwise write
        through a descriptor it holds)."""
        fd = os.open(staged, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{staged} is not a regular file")
            evicted = self.make_room(st.st_size)
            os.fchown(fd, 0, 0)
            os.fchmod(fd, 0o444)
            target = self.path(digest)
            os.rename(staged, target)
            sha256 = sha256 or sha256_of(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        now = time.time()
        self._write_record(digest, {"image": image, "sha256": sha256, "size": st.st_size,
                                    "identity": _identity(st), "published": now, "last_used": now})
        return target, evicted
