"""Build the real Kubernetes components from Go modules, once, and cache them.

Two modules: this directory (kube-apiserver, controller-manager, scheduler, kubelet, kube-proxy, all
from one k8s.io/kubernetes release) and coredns/ (cluster DNS from CoreDNS's own module, so its
dependencies never move Kubernetes'). `python -m tests.cluster.build` builds (CI calls it); tests
call `ensure_binaries()`, which rebuilds a module only when its go.mod, go.sum, mains or the Go
version changed. A failure raises BuildError with one readable message.
"""
from __future__ import annotations

import hashlib
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
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
COREDNS = HERE / "coredns"


class BuildError(RuntimeError):
    pass


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not found:
        raise BuildError("Go toolchain not found (need `go` on PATH or /usr/local/go/bin/go) to build "
                         "kube-apiserver for the integration tests")
    return found


def _fingerprint(go: str, module: Path, ldflags: str) -> str:
    digest = hashlib.sha256()
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout
    digest.update(version.encode() + ldflags.encode())
    for path in sorted([module / "go.mod", module / "go.sum", *module.glob("main.go"), *module.glob("cmd/*/main.go")]):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def kubernetes_version(module: Path = HERE) -> str:
    match = re.search(r"^\s*k8s.io/kubernetes (v[0-9.]+)$", (module / "go.mod").read_text(), re.M)
    if not match:
        raise BuildError("go.mod does not pin k8s.io/kubernetes")
    return match[1]


def _ldflags(module: Path) -> str:
    """Stamp the release into the binaries as upstream's build does; clients (kubectl, helm) read it."""
    version = kubernetes_version(module)
    major, minor = version[1:].split(".")[:2]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
              "gitCommit": "0000000000000000000000000000000000000000", "buildDate": "1970-01-01T00:00:00Z"}
    pkgs = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    return " ".join(f"-X {pkg}.{key}={value}" for pkg in pkgs for key, value in values.items())


def _env() -> dict[str, str]:
    # go.sum is checked in and verifies every module; the public checksum database is not reachable.
    return {**os.environ, "GOFLAGS": "-mod=readonly", "GOSUMDB": "off", "CGO_ENABLED": "0"}


def _build(go: str, module: Path, bin_dir: Path, components: tuple[str, ...], target: str,
           ldflags: str) -> dict[str, Path]:
    paths = {c: bin_dir / c for c in components}
    stamp = bin_dir / f".stamp-{module.name}"
    fingerprint = _fingerprint(go, module, ldflags)
    if all(p.exists() for p in paths.values()) and stamp.exists() and stamp.read_text() == fingerprint:
        return paths
    bin_dir.mkdir(parents=True, exist_ok=True)
    out = f"{bin_dir}/" if len(components) > 1 else str(paths[components[0]])
    proc = subprocess.run([go, "build", "-trimpath", "-ldflags", ldflags, "-o", out, target],
                          cwd=module, env=_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise BuildError(f"building {', '.join(components)} failed (go build in {module}):\n{tail}")
    stamp.write_text(fingerprint)
    return paths


def ensure_binaries(module: Path = HERE, bin_dir: Path = BIN) -> dict[str, Path]:
    go = go_binary()
    paths = _build(go, module, bin_dir, COMPONENTS, "./cmd/...", _ldflags(module))
    return paths | {"coredns": coredns_binary(bin_dir)}


def coredns_binary(bin_dir: Path = BIN) -> Path:
    """CoreDNS alone: the e2e network's DNS needs no Kubernetes component."""
    return _build(go_binary(), COREDNS, bin_dir, ("coredns",), ".", "")["coredns"]


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
