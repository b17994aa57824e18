"""Build the real Kubernetes components and the node's container runtime from Go modules, once, and
cache them.

Six modules: this directory (kube-apiserver, controller-manager, scheduler, kubelet, kube-proxy and
kubectl, all from one k8s.io/kubernetes release), etcd/ (etcd's server, at the release kubeadm pairs
with that Kubernetes), coredns/ (cluster DNS from CoreDNS's own module, so
its dependencies never move Kubernetes'), registry/ (the image registry the container e2e tests pull
from), kwok/ (KWOK, the scale rig's simulated nodes) and runtime/ (containerd 2, its runc shim, ctr and runc:
bookworm's containerd 1.6 and runc 1.1 cannot run pods in user namespaces, and Kubernetes 1.36 no
longer supports containerd 1.x). `python -m tests.cluster.build` builds (CI calls it); tests call
`ensure_binaries()`, which rebuilds a module only when its go.mod, go.sum, Go files or the Go version
changed. A failure raises BuildError with one readable message.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Outside the checkout, so a fresh clone on the same machine (CI) reuses the binaries.
CACHE = Path(os.environ.get("SOPERATOR_CACHE", Path.home() / ".cache" / "soperator"))
BIN = CACHE / "kube-bin"
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl")
COREDNS = HERE / "coredns"
REGISTRY = HERE / "registry"
ETCD = HERE / "etcd"
ETCD_SERVER = "go.etcd.io/etcd/server/v3"
RUNTIME = HERE / "runtime"
KWOK = HERE / "kwok"
KWOK_MODULE = "sigs.k8s.io/kwok"
CONTAINERD = "github.com/containerd/containerd/v2"
RUNC = "github.com/opencontainers/runc"
# containerd's own release build leaves out the snapshotters that need cgo or a kernel driver we do
# not use (btrfs, devmapper, zfs); the shim carries no gRPC server. runc needs cgo for its nsenter
# and libseccomp (the seccomp tag) to apply pods' seccomp profiles.
CONTAINERD_TAGS = "no_btrfs no_devmapper no_zfs urfave_cli_no_docs"
SHIM_TAGS = "no_grpc urfave_cli_no_docs"
RUNC_TAGS = "seccomp urfave_cli_no_docs"


class BuildError(RuntimeError):
    pass


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not found:
        raise BuildError("Go toolchain not found (need `go` on PATH or /usr/local/go/bin/go) to build "
                         "kube-apiserver for the integration tests")
    return found


@functools.cache
def _go_version(go: str) -> str:
    """Asked once per process: every kubectl and ctr call checks the binaries' fingerprints."""
    return subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout


def _fingerprint(go: str, module: Path, ldflags: str) -> str:
    digest = hashlib.sha256()
    version = _go_version(go)
    digest.update(version.encode() + ldflags.encode())
    for path in sorted([module / "go.mod", module / "go.sum", *module.glob("*.go"), *module.glob("cmd/*/main.go")]):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def required_version(module_path: str, module: Path = HERE) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module_path)} (v[0-9.]+)$", (module / "go.mod").read_text(), re.M)
    if not match:
        raise BuildError(f"{module / 'go.mod'} does not pin {module_path}")
    return match[1]


def kubernetes_version(module: Path = HERE) -> str:
    return required_version("k8s.io/kubernetes", module)


def _ldflags(module: Path) -> str:
    """Stamp the release into the binaries as upstream's build does; clients (kubectl, helm) read it."""
    version = kubernetes_version(module)
    major, minor = version[1:].split(".")[:2]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
              "gitCommit": "0000000000000000000000000000000000000000", "buildDate": "1970-01-01T00:00:00Z"}
    pkgs = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    return " ".join(f"-X {pkg}.{key}={value}" for pkg in pkgs for key, value in values.items())


def _env(cgo: bool = False) -> dict[str, str]:
    # go.sum is checked in and verifies every module; the public checksum database is not reachable.
    return {**os.environ, "GOFLAGS": "-mod=readonly", "GOSUMDB": "off", "CGO_ENABLED": "1" if cgo else "0"}


def _go_build(go: str, module: Path, out: str, targets: list[str], ldflags: str, tags: str = "",
              cgo: bool = False, what: str = "") -> None:
    # -s -w: no symbol table or DWARF. Nothing here debugs these binaries, and leaving them out makes
    # each link faster and each binary about a third smaller (the VM node's disk carries some).
    argv = [go, "build", "-trimpath", "-ldflags", f"-s -w {ldflags}".strip(), *(["-tags", tags] if tags else []), "-o", out, *targets]
    proc = subprocess.run(argv, cwd=module, env=_env(cgo), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise BuildError(f"building {what or ' '.join(targets)} failed (go build in {module}):\n{tail}")


def _build(go: str, module: Path, bin_dir: Path, components: tuple[str, ...], target: str,
           ldflags: str) -> dict[str, Path]:
    def build() -> None:
        out = f"{bin_dir}/" if len(components) > 1 else str(bin_dir / components[0])
        _go_build(go, module, out, [target], ldflags, what=", ".join(components))

    return _cached(go, module, bin_dir, components, ldflags, build)


def _cached(go: str, module: Path, bin_dir: Path, components: tuple[str, ...], ldflags: str,
            build) -> dict[str, Path]:
    """Run `build` unless every component exists and the module's fingerprint is unchanged."""
    paths = {c: bin_dir / c for c in components}
    stamp = bin_dir / f".stamp-{module.name}"
    fingerprint = _fingerprint(go, module, ldflags)

    def current() -> bool:
        return all(p.exists() for p in paths.values()) and stamp.exists() and stamp.read_text() == fingerprint

    if current():
        return paths
    bin_dir.mkdir(parents=True, exist_ok=True)
    # One builder per module among processes (the suite's parallel workers): the second waits, then
    # finds the binaries current.
    with open(bin_dir / f".lock-{module.name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not current():
            build()
            stamp.write_text(fingerprint)
    return paths


def ensure_binaries(module: Path = HERE, bin_dir: Path = BIN) -> dict[str, Path]:
    go = go_binary()
    paths = _build(go, module, bin_dir, COMPONENTS, "./cmd/...", _ldflags(module))
    # Not the registry: only the container tests pull from it, and they build it on first use
    # (registry_binary), so the quick start does not wait for it.
    return paths | {"etcd": etcd_binary(bin_dir), "coredns": coredns_binary(bin_dir)} | runtime_binaries(bin_dir)


def runtime_binaries(bin_dir: Path = BIN) -> dict[str, Path]:
    """containerd, containerd-shim-runc-v2, ctr and runc, each stamped with its release."""
    go = go_binary()
    containerd, runc = required_version(CONTAINERD, RUNTIME), required_version(RUNC, RUNTIME)
    containerd_flags = (f"-X {CONTAINERD}/version.Version={containerd[1:]} "
                        f"-X {CONTAINERD}/version.Package={CONTAINERD}")
    runc_flags = f"-X main.version={runc[1:]}"

    def build() -> None:
        daemon = [f"{CONTAINERD}/cmd/containerd", f"{CONTAINERD}/cmd/ctr"]
        _go_build(go, RUNTIME, f"{bin_dir}/", daemon, containerd_flags, CONTAINERD_TAGS)
        _go_build(go, RUNTIME, f"{bin_dir}/", [f"{CONTAINERD}/cmd/containerd-shim-runc-v2"], containerd_flags,
                  SHIM_TAGS)
        _go_build(go, RUNTIME, str(bin_dir / "runc"), [RUNC], runc_flags, RUNC_TAGS, cgo=True)

    names = ("containerd", "ctr", "containerd-shim-runc-v2", "runc")
    return _cached(go, RUNTIME, bin_dir, names, containerd_flags + runc_flags, build)


def etcd_release() -> str:
    return required_version(ETCD_SERVER, ETCD)


def etcd_binary(bin_dir: Path = BIN) -> Path:
    """etcd's server; it reports its release from its own api module, so no stamp is needed."""
    return _build(go_binary(), ETCD, bin_dir, ("etcd",), ".", "")["etcd"]


def coredns_binary(bin_dir: Path = BIN) -> Path:
    """CoreDNS alone: the e2e network's DNS needs no Kubernetes component."""
    return _build(go_binary(), COREDNS, bin_dir, ("coredns",), ".", "")["coredns"]


def build_cached(module: Path, name: str, bin_dir: Path = BIN) -> Path:
    """A small Go module of the tests' own (one `main` package), built once and cached like the rest."""
    return _build(go_binary(), module, bin_dir, (name,), ".", "")[name]


def registry_binary(bin_dir: Path = BIN) -> Path:
    """The CNCF Distribution registry: the container e2e tests' docker:// images come from it."""
    return _build(go_binary(), REGISTRY, bin_dir, ("registry",), ".", "")["registry"]


def kwok_binary(bin_dir: Path = BIN) -> Path:
    """KWOK's controller, for the scale rig only: built on first use, as the registry is."""
    return _build(go_binary(), KWOK, bin_dir, ("kwok",), f"{KWOK_MODULE}/cmd/kwok", "")["kwok"]


def kwok_stages(names: tuple[str, ...]) -> str:
    """KWOK's own stage files (node and pod lifecycles), read from the module cache so that no copy
    of them is kept here: `names` are paths under the module's kustomize/stage/."""
    proc = subprocess.run([go_binary(), "mod", "download", "-json", f"{KWOK_MODULE}@{required_version(KWOK_MODULE, KWOK)}"],
                          cwd=KWOK, env=_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"go mod download {KWOK_MODULE} failed: {proc.stderr.strip()}")
    root = Path(json.loads(proc.stdout)["Dir"]) / "kustomize" / "stage"
    return "\n---\n".join((root / name).read_text() for name in names)


def main() -> int:
    start = time.monotonic()
    try:
        paths = ensure_binaries()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"control plane binaries ready in {time.monotonic() - start:.1f}s: "
          + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
