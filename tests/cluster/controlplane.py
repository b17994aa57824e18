"""A real Kubernetes control plane: etcd, kube-apiserver, controller-manager, scheduler.

The apiserver listens on one address: 127.0.0.1, or the local node's address (node.NODE_IP) when a
kubelet will join, since pods reach it through the `kubernetes` Service and loopback is their own.
Everything lives in one work directory (PKI, etcd data, logs, kubeconfig, state.json). Processes are
started here and stopped here by PID. Ports are chosen free at start; a component that exits during
start (a port taken meanwhile, a bad flag) fails the start at once with its log, instead of a hang.
"""
from __future__ import annotations

import json
import os
import socket
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.cluster.build import ensure_binaries, etcd_release
from tests.cluster.pki import TestPKI
from tests.cluster.process import Component, wait_for

SERVICE_CIDR = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"


class ControlPlaneError(RuntimeError):
    pass


def http_ok(url: str) -> bool:
    """True if a plain-HTTP GET answers 200 (etcd's /health; a readiness probe)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ControlPlane:
    workdir: Path
    api_port: int = 0
    etcd_port: int = 0
    peer_port: int = 0
    address: str = "127.0.0.1"
    components: list[Component] = field(default_factory=list)
    start_seconds: float = 0.0
    # More flags per component name (the scale rig raises client rates and node grace periods).
    extra_args: dict[str, list[str]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def start(self, timeout: float = 120) -> "ControlPlane":
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._claim_etcd_data()
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        self._load_pki()
        self.api_port = self.api_port or free_port()
        self.etcd_port = self.etcd_port or free_port()
        self.peer_port = self.peer_port or free_port()
        self._write_kubeconfig()
        self._define(logs)
        try:
            for comp in self.components:
                comp.start()
                if comp.name == "etcd":
                    self._wait(comp, lambda: http_ok(f"http://127.0.0.1:{self.etcd_port}/health"),
                               began + timeout)
                elif comp.name == "kube-apiserver":
                    self._wait(comp, lambda: self._https_ok("/readyz"), began + timeout)
            # The controller-manager is up once it has created the default ServiceAccount.
            self._wait(self.components[2], self._default_service_account_exists, began + timeout)
            self._wait(self.components[3], lambda: True, began + timeout)
        except ControlPlaneError:
            self.stop()
            raise
        (self.workdir / "state.json").write_text(json.dumps(
            {"api_port": self.api_port, "etcd_port": self.etcd_port, "peer_port": self.peer_port,
             "address": self.address}))
        self.start_seconds = time.monotonic() - began
        return self

    def attach(self) -> bool:
        """Adopt a control plane an earlier invocation started in this work directory, if all of it
        still runs; False if not (then `start` makes a new one)."""
        try:
            state = json.loads((self.workdir / "state.json").read_text())
        except (OSError, ValueError):
            return False
        self.api_port, self.etcd_port, self.peer_port = state["api_port"], state["etcd_port"], state["peer_port"]
        self.address = state["address"]
        self._load_pki()
        self._define(self.workdir / "logs")
        return not self.dead_components() and self._https_ok("/readyz")

    def _claim_etcd_data(self) -> None:
        """etcd upgrades its data one minor release at a time and panics on data it cannot read, so a
        data directory an etcd of another release wrote (a cluster left running, then killed, before
        an update) is refused with the way out rather than handed to a crashing etcd."""
        marker, release = self.workdir / "etcd-release", etcd_release()
        minor = release.rsplit(".", 1)[0]  # patch releases share their data format
        if (self.workdir / "etcd").exists() and (not marker.exists() or marker.read_text().rsplit(".", 1)[0] != minor):
            written = marker.read_text() if marker.exists() else "an older release"
            raise ControlPlaneError(f"{self.workdir / 'etcd'} holds data of etcd {written}, not {release}: "
                                    f"take this cluster down (`examples/quickstart.py down`; volumes stay) and start again")
        marker.write_text(release)

    def _load_pki(self) -> None:
        """Made on the first start, read back by later ones (TestPKI keeps what its directory holds)."""
        self.pki = TestPKI(self.workdir / "pki", ips=("127.0.0.1", self.address, KUBERNETES_SERVICE_IP))
        # The apiserver's identity towards kubelets (logs, exec, port-forward).
        self.kubelet_client = self.pki.issue("kube-apiserver-kubelet-client", "system:masters",
                                             ExtendedKeyUsageOID.CLIENT_AUTH)

    def _define(self, logs: Path) -> None:
        bins = ensure_binaries()
        etcd = str(bins["etcd"])
        pki = self.pki
        etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{self.peer_port}"
        self.components = [
            Component("etcd", [etcd, "--name", "test", "--data-dir", str(self.workdir / "etcd"),
                               "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                               "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                               "--initial-cluster", f"test={peer_url}", "--log-level", "warn"],
                      logs / "etcd.log"),
            Component("kube-apiserver", [
                str(bins["kube-apiserver"]), f"--etcd-servers={etcd_url}", f"--secure-port={self.api_port}",
                f"--bind-address={self.address}", f"--advertise-address={self.address}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}", "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={self.kubelet_client[0]}",
                f"--kubelet-client-key={self.kubelet_client[1]}", "--kubelet-preferred-address-types=InternalIP",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true", "--profiling=false",
                "--v=1"], logs / "kube-apiserver.log"),
            Component("kube-controller-manager", [
                str(bins["kube-controller-manager"]), f"--kubeconfig={self.kubeconfig}", "--leader-elect=false",
                "--secure-port=0", f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_cert}", "--controllers=*", "--v=1"], logs / "kube-controller-manager.log"),
            Component("kube-scheduler", [
                str(bins["kube-scheduler"]), f"--kubeconfig={self.kubeconfig}", "--leader-elect=false",
                "--secure-port=0", "--v=1"], logs / "kube-scheduler.log"),
        ]
        if self.address.startswith("127."):
            # No pod reaches a loopback apiserver through the `kubernetes` Service, and Kubernetes 1.37
            # refuses to publish a loopback address in its endpoints (the apiserver exits at start).
            self.components[1].argv.append("--endpoint-reconciler-type=none")
        for comp in self.components:
            comp.argv += self.extra_args.get(comp.name, [])

    def stop(self) -> None:
        for comp in reversed(self.components):
            comp.stop()

    def dead_components(self) -> list[str]:
        return [c.name for c in self.components if not c.alive()]

    def logs(self) -> str:
        return "\n".join(f"----- {c.name} (last lines) -----\n{c.tail()}" for c in self.components)

    # --- readiness -------------------------------------------------------------------------------

    def _wait(self, comp: Component, ready, deadline: float) -> None:
        wait_for(comp, ready, deadline, ControlPlaneError)

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def request(self, path: str, timeout: float = 5) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context()) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _https_ok(self, path: str) -> bool:
        try:
            return self.request(path, timeout=2)[0] == 200
        except (urllib.error.URLError, OSError):
            return False

    def _default_service_account_exists(self) -> bool:
        try:
            return self.request("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
        except (urllib.error.URLError, OSError):
            return False

    def _write_kubeconfig(self) -> None:
        self.write_kubeconfig(self.kubeconfig, self.pki.admin_cert, self.pki.admin_key)

    def write_kubeconfig(self, path: Path, cert: Path, key: Path, ca: Path | None = None) -> None:
        """`ca`: where the reader finds the CA certificate, if not at the control plane's own path."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url,
                                                       "certificate-authority": str(ca or self.pki.ca_cert)}}],
            "users": [{"name": "user", "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
        }
        path.write_text(json.dumps(config, indent=2))
        os.chmod(path, 0o600)
