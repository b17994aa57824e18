"""Run rendered Kubernetes pod templates as podman containers: a stand-in kubelet for the e2e test.

The e2e test must start the nodes from what `soperator render` produces, not from hand-written
settings. This turns a rendered pod spec into `podman run` flags: image, env, privileged, and every
volumeMount, with ConfigMap and Secret volumes materialised as files with the rendered modes.
"""
from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from images.podman import podman


@dataclass
class VolumeStore:
    """Host directories behind the pod volumes; claims (PVC, hostPath) are mapped by the test."""

    root: Path
    objects: dict[tuple[str, str], dict]
    claims: dict[str, Path] = field(default_factory=dict)
    materialised: dict[str, Path] = field(default_factory=dict)

    def host_path(self, pod: str, volume: dict) -> Path:
        name = volume["name"]
        if "configMap" in volume or "secret" in volume:
            return self._materialise(volume)
        if "persistentVolumeClaim" in volume:
            return self.claims[volume["persistentVolumeClaim"]["claimName"]]
        if "hostPath" in volume:
            return self.claims[volume["hostPath"]["path"]]
        path = self.root / "empty" / pod / name  # emptyDir and claim templates: per pod
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _materialise(self, volume: dict) -> Path:
        # Once per volume: rewriting a file that a running container reads shows it an empty file.
        key = json.dumps(volume, sort_keys=True)
        if key not in self.materialised:
            self.materialised[key] = self._write_files(volume)
        return self.materialised[key]

    def _write_files(self, volume: dict) -> Path:
        if "configMap" in volume:
            source, kind = volume["configMap"], "ConfigMap"
            files = {k: v.encode() for k, v in self.objects[(kind, source["name"])]["data"].items()}
        else:
            source, kind = volume["secret"], "Secret"
            files = {k: base64.b64decode(v) for k, v in self.objects[(kind, source["secretName"])]["data"].items()}
        path = self.root / kind / (source.get("name") or source["secretName"])
        path.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            target = path / name
            target.write_bytes(data)
            os.chmod(target, source.get("defaultMode", 0o644))
        return path


def run_args(name: str, pod: dict, store: VolumeStore, network: str) -> list[str]:
    container = pod["containers"][0]
    args = ["run", "-d", "--name", name, "--hostname", name, "--network", network]
    if container.get("securityContext", {}).get("privileged"):
        args.append("--privileged")
    for env in container.get("env", []):
        args += ["-e", f"{env['name']}={env['value']}"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {"name": mount["name"]})
        host = store.host_path(name, volume)
        args += ["-v", f"{host}:{mount['mountPath']}{':ro' if mount.get('readOnly') else ''}"]
    return args + [container["image"]]


def start_pod(name: str, pod: dict, store: VolumeStore, network: str, extra: list[str] = ()) -> str:
    args = run_args(name, pod, store, network)
    return podman(*args[:-1], *extra, args[-1]).stdout.strip()
