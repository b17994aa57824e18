"""A stand-in kubelet for the test control plane, which has none.

It reports the pods of one namespace through their status subresource, as envtest users do, except
the pods it is told to run: those it starts for real with podman, from the Pod object the apiserver
holds (admission-injected service-account volume included), and reports Ready only once their
readiness probe answers. Job pods are reported Succeeded, so the real job controller completes the
Job; every other pod is reported Running and Ready, so the real StatefulSet and Deployment controllers
count it.
"""
from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from urllib.parse import urlparse

from images.podman import podman
from tests.cluster.controlplane import http_ok
from tests.support.podman_pods import VolumeStore, start_pod


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeletStandIn:
    def __init__(self, kubectl, control_plane, namespace: str, run_labels: dict[str, str], workdir: Path):
        self.kubectl, self.plane, self.namespace = kubectl, control_plane, namespace
        self.run_labels, self.workdir = run_labels, workdir
        self.handled: dict[str, str] = {}  # pod name -> what was reported
        self.containers: list[str] = []
        self.probes: dict[str, str] = {}  # pod name -> readiness URL of a pod started with podman

    def sync(self) -> None:
        pods = json.loads(self.kubectl("-n", self.namespace, "get", "pods", "-o", "json").stdout)["items"]
        for pod in pods:
            name = pod["metadata"]["name"]
            if name in self.probes and http_ok(self.probes[name]):
                self._report(name, "Running", ready=True)
                del self.probes[name]
            if name in self.handled or pod["metadata"].get("deletionTimestamp"):
                continue
            labels = pod["metadata"].get("labels", {})
            if self.run_labels.items() <= labels.items():
                self.probes[name] = self._run(pod)
                self._report(name, "Running", ready=False)
            elif any(ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences", [])):
                self._report(name, "Succeeded", ready=False)
            else:
                self._report(name, "Running", ready=True)

    def logs(self) -> str:
        procs = [podman("logs", cid, check=False) for cid in self.containers]
        return "\n".join(proc.stdout + proc.stderr for proc in procs)

    def stop(self) -> None:
        for cid in self.containers:
            podman("rm", "-f", "-t", "5", cid, check=False)

    def _run(self, pod: dict) -> str:
        spec, name = pod["spec"], pod["metadata"]["name"]
        store = VolumeStore(self.workdir / name, {}, service_account=self._service_account(spec))
        api = urlparse(self.plane.url)
        cid = start_pod(f"{self.namespace}-{name}", spec, store, "host", hostname=name[:63],
                        extra=["-e", f"KUBERNETES_SERVICE_HOST={api.hostname}",
                               "-e", f"KUBERNETES_SERVICE_PORT={api.port}"])
        self.containers.append(cid)
        container = spec["containers"][0]
        probe = container["readinessProbe"]["httpGet"]
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        port = ports.get(probe["port"], probe["port"])
        return f"http://127.0.0.1:{port}{probe.get('path', '/')}"

    def _service_account(self, spec: dict) -> Path:
        path = self.workdir / "serviceaccount" / spec["serviceAccountName"]
        path.mkdir(parents=True, exist_ok=True)
        token = self.kubectl("-n", self.namespace, "create", "token", spec["serviceAccountName"]).stdout.strip()
        files = {"token": token, "ca.crt": self.plane.pki.ca_cert.read_text(), "namespace": self.namespace}
        for file, text in files.items():
            (path / file).write_text(text)
            (path / file).chmod(0o644)  # the container runs as an unprivileged user
        path.chmod(0o755)
        return path

    def _report(self, name: str, phase: str, ready: bool) -> None:
        now, flag = _now(), "True" if ready else "False"
        conditions = [{"type": t, "status": s, "lastTransitionTime": now} for t, s in (
            ("PodScheduled", "True"), ("Initialized", "True"), ("ContainersReady", flag), ("Ready", flag))]
        status = {"phase": phase, "conditions": conditions, "startTime": now}
        self.kubectl("-n", self.namespace, "patch", "pod", name, "--subresource=status", "--type=merge",
                     "-p", json.dumps({"status": status}))
        self.handled[name] = phase

    def run_until(self, done, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; pods: {self.handled}")
            self.sync()
            time.sleep(0.5)
