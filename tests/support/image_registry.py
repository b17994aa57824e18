"""A throwaway image registry for the container e2e tests: the CNCF Distribution registry, built from Go
modules (tests/cluster/build.py), serving plain HTTP on the address the test gives (the host side of
the test's own podman network), its storage a directory of the test's. The test owns the process:
started here, stopped by its PID. Images go in with `podman push`; enroot in the workers pulls them
(`docker://`, with ENROOT_ALLOW_HTTP in the node set's enroot.conf)."""
from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from images.podman import podman
from tests.cluster.build import registry_binary
from tests.support.wait import until
from tests.support.processes import stop

CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {root}/storage
http:
  addr: {address}:{port}
"""
MANIFEST_TYPES = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"


class Registry:
    def __init__(self, root: Path, address: str, port: int):
        self.root, self.address, self.port = root, address, port
        self.proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"{self.address}:{self.port}"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "config.yml").write_text(CONFIG.format(root=self.root, address=self.address, port=self.port))
        # No traces or metrics exported anywhere: the registry's OpenTelemetry SDK stays off.
        env = {"PATH": "/usr/bin:/bin", "OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "none"}
        self.proc = subprocess.Popen([str(registry_binary()), "serve", str(self.root / "config.yml")], env=env,
                                     stdout=subprocess.DEVNULL, stderr=open(self.root / "registry.log", "ab"))
        until(lambda: self.proc.poll() is not None or self._answers(), 30, "the registry to answer")
        if self.proc.poll() is not None:
            raise RuntimeError(f"registry exited: {(self.root / 'registry.log').read_text()[-2000:]}")

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def push(self, image: str, name: str) -> str:
        """`image` from the test's podman store into the registry as `name` (repository:tag); returns the
        reference a worker pulls (docker://host:port/name, the enroot URI)."""
        # Docker's schema 2 manifest: enroot first asks for it with no Accept header, and the registry
        # answers that for an OCI manifest with 404 (it cannot give one the client did not ask for).
        podman("push", "-q", "--tls-verify=false", "--format", "v2s2", "--compression-format", "gzip", image,
               f"{self.host}/{name}")
        repository, tag = name.rsplit(":", 1)
        request = urllib.request.Request(f"http://{self.host}/v2/{repository}/manifests/{tag}", method="HEAD",
                                         headers={"Accept": MANIFEST_TYPES})
        with urllib.request.urlopen(request, timeout=10) as answer:  # HTTPError if the push left no tag
            assert answer.status == 200
        return f"docker://{self.host}/{name}"

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None
