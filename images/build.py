"""Build every image with podman: `python -m images.build [--force]`.

Order: a Debian base from debootstrap (no registry needed; the tarball is cached), the common node
image, then controller, worker, login, jail and populate-jail. A build whose inputs did not change
is skipped (a hash of the inputs is stored as an image label).
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from images.podman import CACHE, PodmanError, podman
from soperator import __version__
from spank_chroot.build import PLUGIN, build_plugin

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASE = "localhost/soperator/debian:bookworm"
ROOTFS_TAR = CACHE / "images" / "bookworm-minbase.tar"
# (image name, directory under images/); order matters: later ones build FROM earlier ones.
IMAGES = [("node", "common"), ("controller", "controller"), ("worker", "worker"), ("login", "login"),
          ("jail", "jail"), ("populate-jail", "populate_jail")]
LABEL = "dev.soperator.inputs"


def image_ref(name: str) -> str:
    return f"localhost/soperator/{name}:{__version__}"


def ensure_base() -> None:
    if podman("image", "exists", BASE, check=False).returncode == 0:
        return
    if not ROOTFS_TAR.exists():
        if not shutil.which("debootstrap"):
            raise PodmanError("debootstrap not found: install it (see .ci/run)")
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            rootfs = Path(tmp) / "rootfs"
            subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs),
                            "http://deb.debian.org/debian"], check=True, capture_output=True)
            ROOTFS_TAR.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["tar", "-C", str(rootfs), "-cf", str(ROOTFS_TAR) + ".part", "."], check=True)
            Path(str(ROOTFS_TAR) + ".part").rename(ROOTFS_TAR)
    podman("import", str(ROOTFS_TAR), BASE)


def _context(directory: str) -> Path:
    ctx = Path(tempfile.mkdtemp(prefix="soperator-image-"))
    for item in (HERE / directory).iterdir():
        shutil.copy(item, ctx / item.name)
    text = (ctx / "Containerfile").read_text().replace("VERSION", __version__)
    (ctx / "Containerfile").write_text(text)
    shutil.copy(HERE / "common" / "fixed-ids.sh", ctx / "fixed-ids.sh")
    shutil.copy("/etc/apt/sources.list.d/debian.sources", ctx / "debian.sources")
    shutil.copytree(ROOT / "soperator" / "node", ctx / "soperator_node",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PLUGIN, ctx / "spank_chroot.so")
    return ctx


def _digest(ctx: Path, parent: str) -> str:
    digest = hashlib.sha256(parent.encode())
    for path in sorted(p for p in ctx.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(ctx)).encode() + path.read_bytes())
    return digest.hexdigest()[:24]


def _label(ref: str) -> str:
    proc = podman("image", "inspect", "--format", f"{{{{index .Labels \"{LABEL}\"}}}}", ref, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def build_all(force: bool = False) -> dict[str, float]:
    build_plugin()
    ensure_base()
    timings, parent = {}, _label(BASE) or BASE
    for name, directory in IMAGES:
        ctx = _context(directory)
        try:
            # Each image's digest chains its parents' so a change below rebuilds everything above.
            digest = _digest(ctx, parent)
            ref = image_ref(name)
            if force or _label(ref) != digest:
                started = time.monotonic()
                podman("build", "--layers", "--label", f"{LABEL}={digest}", "-t", ref, "-f",
                       str(ctx / "Containerfile"), str(ctx))
                timings[name] = round(time.monotonic() - started, 1)
            parent = parent + digest
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force", action="store_true", help="rebuild even if inputs are unchanged")
    args = parser.parse_args(argv)
    try:
        timings = build_all(args.force)
    except (PodmanError, subprocess.CalledProcessError) as exc:
        print(f"error: image build failed: {exc}", file=sys.stderr)
        return 1
    print("images ready; built now (s):", timings or "none, all up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
