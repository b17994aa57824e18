"""Build every image with podman: `python -m images.build [--force]`.

Order: a Debian base from debootstrap (no registry needed; the tarball is cached), the common node
image (which also compiles Pyxis and enroot from images/vendor.py's pinned archives), then
controller, worker, login, jail, populate-jail, the operator, and the accounting database. A build
whose inputs did not change is skipped (a hash of the inputs and of its parents' is stored as an image label).
Each image's Debian packages, name and exact version, are recorded per build under
~/.cache/soperator/images/packages/<image>.txt (record_packages).
`--only operator` builds one image and what it is built FROM.
"""
from __future__ import annotations

import argparse
import hashlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from images import vendor
from images.podman import CACHE, PodmanError, podman, podman_streamed, store_lock
from soperator.api import releases

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The Debian suite of the images that carry each Slurm release (soperator.api.releases), and its apt
# sources under images/common/. Debian forky (testing) serves Slurm 26.05, trixie 24.11. Measured:
# forky's Slurm on a trixie base with pinning installs 155 packages from forky (libc6, systemd and
# openssl among them), a mix nobody tests; a whole forky root is one suite's set. 24.11's images are
# the release clusters upgrade from (`--slurm 24.11`).
SUITES = {"26.05": ("forky", "debian.sources"), "24.11": ("trixie", "debian-trixie.sources")}
SUITE = SUITES[releases.DEFAULT][0]
# The operator carries no Slurm: it stays on stable trixie (Python 3.13, the wheels' target).
OPERATOR_SUITE = "trixie"
# The Slurm release every image must get by default. forky moves: a build that gets another release
# fails (check_slurm_release), and each build's exact versions are recorded (record_packages).
SLURM_RELEASE = releases.DEFAULT


def base_ref(suite: str) -> str:
    return f"localhost/soperator/debian:{suite}-nodebs"


# Containerfiles say `FROM BASE_IMAGE`. Renamed when what goes into the base changes, so that a
# machine with an older cached base builds the new one.
# image name -> (directory under images/, images it is built FROM or copies from); parents come first.
IMAGES = {"node": ("common", ()), "controller": ("controller", ("node",)), "worker": ("worker", ("node",)),
          "login": ("login", ("node",)), "jail": ("jail", ("node",)),
          "populate-jail": ("populate_jail", ("jail", "node")), "operator": ("operator", ()),
          "database": ("database", ("node",))}
LABEL = "dev.soperator.inputs"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEBOOTSTRAP_SCRIPTS = "/usr/share/debootstrap/scripts"
# Per image, the exact version of every Debian package it holds: the record of its build, since the
# suites the images install from move on (soperator cannot pin a live suite).
PACKAGES = CACHE / "images" / "packages"


def image_ref(name: str, release: str = SLURM_RELEASE) -> str:
    return f"localhost/soperator/{name}:{releases.image_tag(release)}"


def _record(name: str, release: str) -> Path:
    return PACKAGES / (f"{name}.txt" if release == SLURM_RELEASE else f"{name}-slurm{release}.txt")


# Where a person waiting on a build is told how far it is: a callback given one line at a time.
Progress = Callable[[str], None]
# buildah prefixes each step of a multi-stage build with its stage: `[1/3] STEP 4/11: RUN …`.
_STEP = re.compile(r"^(?:\[(\d+)/(\d+)\] )?STEP (\d+)/(\d+): (.*)")


def step_note(line: str, width: int = 72) -> str | None:
    """`step 4/11: RUN apt-get install …` (`stage 1/3 step 4/11: …` in a multi-stage build) for a
    podman build's STEP line, else None."""
    match = _STEP.match(line)
    if not match:
        return None
    stage = f"stage {match[1]}/{match[2]} " if match[1] else ""
    what = " ".join(match[5].split())
    return f"{stage}step {match[3]}/{match[4]}: {what if len(what) <= width else what[:width - 1] + '…'}"


def _teller(progress: Progress | None, head: str) -> Progress:
    return (lambda note: progress(f"{head}: {note}")) if progress is not None else (lambda note: None)


def ensure_base(suite: str = SUITE, progress: Progress | None = None) -> str:
    """A Debian `suite` minbase image made with debootstrap (the tarball is cached); its name."""
    with store_lock():
        return _ensure_base(suite, progress)


def _ensure_base(suite: str, progress: Progress | None) -> str:
    ref, tar = base_ref(suite), CACHE / "images" / f"{suite}-minbase-nodebs.tar"
    if podman("image", "exists", ref, check=False).returncode == 0:
        return ref
    say = _teller(progress, f"base image {ref}")
    if not tar.exists():
        say(f"debootstrap of Debian {suite} (a few minutes, once: the tarball is kept)")
        if not shutil.which("debootstrap"):
            raise PodmanError("debootstrap not found: install it (see .ci/run)")
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            rootfs = Path(tmp) / "rootfs"
            # Every Release file checked against Debian's archive keys, or nothing is installed.
            # bookworm's debootstrap has no script named forky; sid's bootstraps every newer suite.
            script = [] if Path(DEBOOTSTRAP_SCRIPTS, suite).exists() else [f"{DEBOOTSTRAP_SCRIPTS}/sid"]
            subprocess.run(["debootstrap", "--variant=minbase", f"--keyring={KEYRING}", "--force-check-gpg", suite,
                            str(rootfs), "http://deb.debian.org/debian", *script], check=True, capture_output=True)
            tar.parent.mkdir(parents=True, exist_ok=True)
            # debootstrap leaves the ~120 MB of .debs it installed; every image would carry them.
            subprocess.run(["tar", "-C", str(rootfs), "--exclude=./var/cache/apt/archives/*.deb",
                            "-cf", str(tar) + ".part", "."], check=True)
            Path(str(tar) + ".part").rename(tar)
    say("importing into podman")
    podman("import", str(tar), ref)
    return ref


def _context(directory: str, sources: dict[str, vendor.Source], release: str = SLURM_RELEASE) -> Path:
    ctx = Path(tempfile.mkdtemp(prefix="soperator-image-"))
    for item in (HERE / directory).iterdir():
        if item.is_file():  # not a __pycache__ a test's import of a script here made
            shutil.copy(item, ctx / item.name)
    suite, apt_sources = SUITES[release]
    base = base_ref(OPERATOR_SUITE if directory == "operator" else suite)
    text = (ctx / "Containerfile").read_text().replace("VERSION", releases.image_tag(release))
    (ctx / "Containerfile").write_text(text.replace("BASE_IMAGE", base))
    if directory != "operator":  # the operator's directory has its own (trixie)
        shutil.copy(HERE / "common" / apt_sources, ctx / "debian.sources")
        shutil.copy(HERE / "common" / "apt-preferences", ctx / "apt-preferences")
    no_cache = shutil.ignore_patterns("__pycache__", "*.pyc")
    if directory == "operator":
        # The package source, for the digest; wheels are made from it only when a build is needed.
        shutil.copytree(ROOT / "soperator", ctx / "src" / "soperator", ignore=no_cache)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(ROOT / name, ctx / "src" / name)
        shutil.copy(ROOT / "requirements.txt", ctx / "requirements.txt")  # the lock: in the digest too
        return ctx
    shutil.copy(HERE / "common" / "install-packages.sh", ctx / "install-packages.sh")
    shutil.copytree(ROOT / "soperator" / "node", ctx / "soperator_node", ignore=no_cache)
    if directory == "common":  # the plugin's sources, built in the image's own build stage
        (ctx / "spank_chroot").mkdir()
        plugin = ROOT / "spank_chroot"
        for path in (plugin / "__init__.py", plugin / "build.py", *sorted(plugin.glob("*.[ch]"))):
            shutil.copy(path, ctx / "spank_chroot" / path.name)
        vendor.copy_into(ctx, sources)  # Pyxis and enroot, compiled in that stage too
    return ctx


def _operator_wheels(ctx: Path) -> None:
    """The operator and its dependencies as wheels for the image's Python (Debian trixie: 3.13),
    fetched here, so the image build itself needs no package index. The dependencies are exactly the
    lock file's (requirements.txt, hashes checked), the versions CI tests with."""
    wheels = ctx / "wheels"
    _pip("wheel", "--no-deps", "-w", str(wheels), str(ctx / "src"))
    machine = platform.machine()
    platforms = [f"--platform=manylinux_2_{n}_{machine}" for n in (36, 34, 28, 17)] + [
        f"--platform=manylinux2014_{machine}"]
    _pip("download", "-d", str(wheels), "--only-binary=:all:", "--python-version=3.13", "--implementation=cp",
         *platforms, "--require-hashes", "-r", str(ctx / "requirements.txt"))
    shutil.copy(ctx / "requirements.txt", wheels / "requirements.txt")
    shutil.rmtree(ctx / "src")


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PodmanError(f"pip {args[0]} for the operator image failed:\n{proc.stderr[-3000:]}")


def _digest(ctx: Path, parent: str) -> str:
    digest = hashlib.sha256(parent.encode())
    for path in sorted(p for p in ctx.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(ctx)).encode() + path.read_bytes())
    return digest.hexdigest()[:24]


def _label(ref: str) -> str:
    proc = podman("image", "inspect", "--format", f"{{{{index .Labels \"{LABEL}\"}}}}", ref, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def record_packages(name: str, digest: str, release: str = SLURM_RELEASE) -> Path:
    """PACKAGES/<name>.txt (<name>-slurm<release>.txt for another release): a header naming the image
    and its inputs, then `package=version` lines, sorted. Written once per build (a cached image keeps
    its record)."""
    ref, path = image_ref(name, release), _record(name, release)
    header = f"# {ref} inputs={digest}\n"
    if path.exists() and path.read_text().startswith(header):
        return path
    listed = podman("run", "--rm", "--network=none", "--entrypoint", "dpkg-query", ref, "-W", "-f",
                    "${db:Status-Abbrev}|${binary:Package}=${Version}\n").stdout
    # Only what is installed ("ii"), not packages removed with their config files left ("rc").
    lines = sorted(line.split("|", 1)[1] for line in listed.splitlines() if line.startswith("ii"))
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(header + "".join(f"{line}\n" for line in lines))
    part.replace(path)
    return path


def check_slurm_release(record: Path, release: str = SLURM_RELEASE) -> None:
    """Fail when an image's Slurm is not `release` (forky moved on to another release)."""
    for line in record.read_text().splitlines():
        package, _, version = line.partition("=")
        if package in ("slurm-client", "slurmd", "libslurm-dev") and not version.startswith(release + "."):
            raise PodmanError(f"{record.name}: {package} {version} is not Slurm {release}: the suite moved on; "
                              f"see images/build.py SUITES")


def _build(ctx: Path, ref: str, digest: str, say: Progress | None) -> None:
    argv = ("build", "--layers", "--label", f"{LABEL}={digest}", "-t", ref, "-f", str(ctx / "Containerfile"), str(ctx))
    if say is None:
        podman(*argv)
        return
    podman_streamed(*argv, on_line=lambda line: (note := step_note(line)) and say(note))


def drop_replaced_images() -> None:
    """A rebuild leaves the image it replaced, and that image's cached steps, untagged in the store.
    Kept, they filled a long-lived CI machine's disk (32 GB of 37 after a week of rebuilds) until the
    test kubelet saw disk pressure and stopped admitting pods. Only untagged images no container uses
    go: every tagged image, and the cached steps it was built from, stay. Under the store's lock: the
    untagged steps of a build under way in another process would go too."""
    with store_lock():
        podman("image", "prune", "--force", timeout=900)


def _wanted(only: list[str] | None, release: str = SLURM_RELEASE) -> list[str]:
    """Parents first. Another release than the default has no operator image: the operator carries no
    Slurm, one serves every release."""
    if release != SLURM_RELEASE and "operator" in (only or ()):
        raise PodmanError(f"the operator image carries no Slurm: build it without --slurm {release}")
    if not only:
        return [name for name in IMAGES if release == SLURM_RELEASE or name != "operator"]
    unknown = sorted(set(only) - set(IMAGES))
    if unknown:
        raise PodmanError(f"unknown image(s) {', '.join(unknown)}; known: {', '.join(IMAGES)}")
    wanted: set[str] = set()
    todo = list(only)
    while todo:
        name = todo.pop()
        wanted.add(name)
        todo += IMAGES[name][1]
    return [name for name in IMAGES if name in wanted]


def build_all(force: bool = False, only: list[str] | None = None,
              sources: dict[str, vendor.Source] | None = None, progress: Progress | None = None,
              release: str = SLURM_RELEASE) -> dict[str, float]:
    """Build the images (all, or `only` these and their parents) for Slurm `release`; returns seconds
    per image built. `sources` replaces vendored archives by upstream's (images.vendor); `progress` is
    told which image is building and its steps as they start. One process at a time (store_lock): a
    second waits, then finds the images up to date."""
    with store_lock():
        return _build_all(force, only, sources, progress, release)


def _build_all(force: bool, only: list[str] | None, sources: dict[str, vendor.Source] | None,
               progress: Progress | None, release: str) -> dict[str, float]:
    if release not in SUITES:
        raise PodmanError(f"no images for Slurm {release}; known: {', '.join(SUITES)}")
    names = _wanted(only, release)
    timings, digests = {}, {}
    for number, name in enumerate(names, 1):
        say = _teller(progress, f"image {number}/{len(names)} {name}")
        directory, parents = IMAGES[name]
        ctx = _context(directory, sources or {}, release)
        try:
            # An image's digest covers its parents' so a change below rebuilds everything above.
            suite = OPERATOR_SUITE if directory == "operator" else SUITES[release][0]
            base = ensure_base(suite, progress) if not parents else ""
            digest = _digest(ctx, base + "".join(digests[p] for p in parents))
            digests[name] = digest
            ref = image_ref(name, release)
            if force or _label(ref) != digest:
                say("building (its inputs changed)")
                started = time.monotonic()
                if directory == "operator":
                    _operator_wheels(ctx)
                    # Bind-mounted files do not key podman's layer cache; this file does.
                    (ctx / "inputs").write_text(digest + "\n")
                _build(ctx, ref, digest, say if progress is not None else None)
                timings[name] = round(time.monotonic() - started, 1)
                say(f"built in {timings[name]:.0f} s")
            else:
                say("up to date")
            check_slurm_release(record_packages(name, digest, release), release)
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
    if timings:
        drop_replaced_images()
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force", action="store_true", help="rebuild even if inputs are unchanged")
    parser.add_argument("--only", action="append", metavar="IMAGE",
                        help=f"build this image and its parents only (repeatable): {', '.join(IMAGES)}")
    parser.add_argument("--source", action="append", default=[], metavar="NAME=URL@SHA256",
                        help="take an upstream archive by URL and checksum instead of the vendored one: "
                             f"{', '.join(vendor.SOURCES)}")
    parser.add_argument("--slurm", default=SLURM_RELEASE, choices=sorted(SUITES),
                        help=f"the Slurm release the images carry (default {SLURM_RELEASE}); another is tagged "
                             "<version>-slurm<release>")
    args = parser.parse_args(argv)
    try:
        sources = {s.name: s for s in map(vendor.from_upstream, args.source)}
        timings = build_all(args.force, args.only, sources, progress=lambda note: print(note, flush=True),
                            release=args.slurm)
    except (PodmanError, subprocess.CalledProcessError) as exc:
        print(f"error: image build failed: {exc}", file=sys.stderr)
        return 1
    print("images ready; built now (s):", timings or "none, all up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
