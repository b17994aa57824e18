"""Upstream sources the node and jail images compile and no registry here serves: Pyxis and enroot.

Each is a pinned release archive checked by sha256 before it enters a build context. Where one is
found: the directory `SOPERATOR_VENDOR_DIR` names, the workspace's `../shared/vendor` beside the
checkout, or this machine's cache (filled from either on first use). A production build takes
upstream's own archive instead: `python -m images.build --source pyxis=URL@SHA256` (upstream's tag
archives hold the same tree as the local ones but differ byte for byte, so they carry their own sum).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from images.podman import CACHE, PodmanError

ROOT = Path(__file__).resolve().parent.parent
STORE = CACHE / "vendor"


@dataclass(frozen=True)
class Source:
    name: str
    version: str
    sha256: str  # of the archive `git archive --prefix=NAME-VERSION/ vVERSION | gzip -n -9` makes
    url: str = ""  # set by --source for a production build; its sha256 replaces the one above

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"


SOURCES = {s.name: s for s in (
    Source("pyxis", "0.24.0", "ede95ba2d48542881f137d9c07c417c5c765994710a74c593a21b3328f311f5d"),
    Source("enroot", "4.1.2", "65d7098241b5a86faf48ba29bbca1462e19682bf49d6b89c8a2d934f0196b4da"),
)}


def from_upstream(spec: str) -> Source:
    """`NAME=URL@SHA256` (the --source argument) -> that source, fetched from URL at build time."""
    name, _, rest = spec.partition("=")
    url, _, digest = rest.rpartition("@")
    if name not in SOURCES or not url or len(digest) != 64:
        raise PodmanError(f"--source {spec!r}: expected NAME=URL@SHA256 with NAME one of {', '.join(SOURCES)}")
    return Source(name, SOURCES[name].version, digest.lower(), url)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _candidates(source: Source) -> list[Path]:
    dirs = [Path(d) for d in filter(None, [os.environ.get("SOPERATOR_VENDOR_DIR")])]
    return [d / source.filename for d in [*dirs, ROOT.parent / "shared" / "vendor", STORE]]


def _download(source: Source, target: Path) -> None:
    with urllib.request.urlopen(source.url, timeout=60) as response, open(target, "wb") as out:
        shutil.copyfileobj(response, out)


def archive(source: Source) -> Path:
    """The checked archive, kept in this machine's cache; raises naming every place looked in."""
    kept = STORE / source.filename
    if kept.exists() and _sha256(kept) == source.sha256:
        return kept
    STORE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=STORE) as tmp:
        fetched = Path(tmp) / source.filename
        if source.url:
            _download(source, fetched)
        else:
            found = next((p for p in _candidates(source) if p.exists() and _sha256(p) == source.sha256), None)
            if found is None:
                raise PodmanError(f"{source.filename} with sha256 {source.sha256} not found in "
                                  f"{', '.join(str(p.parent) for p in _candidates(source))}: set "
                                  "SOPERATOR_VENDOR_DIR, or build with --source NAME=URL@SHA256")
            shutil.copy(found, fetched)
        if _sha256(fetched) != source.sha256:
            raise PodmanError(f"{source.url}: sha256 {_sha256(fetched)}, expected {source.sha256}")
        fetched.replace(kept)
    return kept


def copy_into(ctx: Path, overrides: dict[str, Source]) -> None:
    """Every source's archive into the build context, under its plain name (NAME.tar.gz), so the
    Containerfile needs no version."""
    for name, source in SOURCES.items():
        shutil.copy(archive(overrides.get(name, source)), ctx / f"{name}.tar.gz")
