"""Run rendered Kubernetes pod templates as podman containers: a stand-in kubelet for the e2e test.

The e2e tests must start pods from what `soperator render` or a chart produces, not from hand-written
settings. This turns a pod spec into `podman run` flags: image, command and args, env, the security
context (privileged, user, read-only root, dropped capabilities, no privilege escalation), the device
plugins' devices, and every volumeMount, with ConfigMap and Secret volumes materialised as files with
the rendered modes.
"""
from __future__ import annotations

import base64
import json
import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from images.podman import PodmanError, podman
from soperator.node.layout import FUSE_DEVICE, FUSE_RESOURCE
from soperator.render.seccomp_profile import PROFILE_DIR
from tests.support_paths import SECCOMP_FILES


@dataclass
class VolumeStore:
    """Host directories behind the pod volumes; claims (PVC, hostPath) are mapped by the test."""

    root: Path
    objects: dict[tuple[str, str], dict]
    claims: dict[str, Path] = field(default_factory=dict)
    materialised: dict[str, Path] = field(default_factory=dict)
    service_account: Path | None = None  # token, ca.crt, namespace: what a kubelet projects

    def host_path(self, pod: str, volume: dict) -> Path:
        name = volume["name"]
        if "configMap" in volume or "secret" in volume:
            return self._materialise(volume)
        if "persistentVolumeClaim" in volume:
            return self.claims[volume["persistentVolumeClaim"]["claimName"]]
        if "hostPath" in volume:
            return self.claims[volume["hostPath"]["path"]]
        if "projected" in volume and self.service_account:  # the admission-injected kube-api-access-*
            return self.service_account
        path = self.root / "empty" / pod / name  # emptyDir and claim templates: per pod
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)  # as a kubelet makes an emptyDir: writable whatever user the pod runs as
        return path

    def update_config_map(self, name: str, data: dict[str, str]) -> None:
        """Change a ConfigMap under running pods the way a kubelet does: each file swapped whole, so a
        reader sees the old or the new file, never a half-written one."""
        path = self.root / "ConfigMap" / name
        for file, text in data.items():
            tmp = path / f".{file}.new"
            tmp.write_text(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path / file)

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
        if kind == "ConfigMap":
            path.chmod(0o777)  # as the kubelet makes a ConfigMap volume's directory (seen on the test node)
        for name, data in files.items():
            target = path / name
            target.write_bytes(data)
            os.chmod(target, source.get("defaultMode", 0o644))
        return path


def localhost_profile(name: str) -> Path:
    directory, _, file = name.partition("/")
    assert directory == PROFILE_DIR, f"not a profile the operator chart installs: {name}"
    return SECCOMP_FILES / file


def security_args(pod: dict, container: dict) -> list[str]:
    ctx = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    args = ["--privileged"] if ctx.get("privileged") else []
    if "runAsUser" in ctx:  # without runAsGroup, the group comes from the image, as with a kubelet
        group = f":{ctx['runAsGroup']}" if "runAsGroup" in ctx else ""
        args += ["--user", f"{ctx['runAsUser']}{group}"]
    if ctx.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]  # a kubelet adds no tmpfs either
    if "ALL" in ctx.get("capabilities", {}).get("drop", []):
        args.append("--cap-drop=all")
    args += [f"--cap-add={cap}" for cap in ctx.get("capabilities", {}).get("add", [])]
    # RuntimeDefault is podman's own default seccomp profile; Unconfined AppArmor is moot on a host
    # without AppArmor (this one). soperator's Localhost profiles are the operator chart's files, as
    # its DaemonSet installs them.
    seccomp = ctx.get("seccompProfile", {})
    if seccomp.get("type") == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    elif seccomp.get("type") == "Localhost":
        args += ["--security-opt", f"seccomp={localhost_profile(seccomp['localhostProfile'])}"]
    if ctx.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    return args


def device_args(container: dict) -> list[str]:
    """What the kubelet adds for a device plugin's resource: soperator.dev/fuse is the host's
    /dev/fuse, made in the container with the host's mode (soperator/fuse_device's Allocate answer)."""
    limits = container.get("resources", {}).get("limits", {})
    return ["--device", f"{FUSE_DEVICE}:{FUSE_DEVICE}:rw"] if limits.get(FUSE_RESOURCE) else []


def run_args(name: str, pod: dict, store: VolumeStore, network: str, hostname: str | None = None,
             address: str | None = None, dns: str | None = None) -> tuple[list[str], list[str]]:
    """`podman run` arguments, split as (options, image and its arguments). `dns` is the pod's one
    resolver, as a kubelet (dnsPolicy ClusterFirst) gives a pod the cluster DNS alone; a pod on the
    node's own network (hostNetwork) keeps the node's resolvers."""
    container = pod["containers"][0]
    args = ["run", "-d", "--name", name, "--hostname", hostname or name, "--network", network]
    if address:
        args += ["--ip", address]
    if dns:
        args += ["--dns", dns]
    args += security_args(pod, container) + device_args(container)
    for env in container.get("env", []):
        args += ["-e", f"{env['name']}={env['value'] if 'value' in env else downward(env['valueFrom'], name)}"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {"name": mount["name"]})
        host = store.host_path(name, volume)
        args += ["-v", f"{host}:{mount['mountPath']}{':ro' if mount.get('readOnly') else ''}"]
    if container.get("command"):
        args += ["--entrypoint", json.dumps(container["command"])]
    return args, [container["image"], *container.get("args", [])]


def downward(source: dict, name: str) -> str:
    """The downward API's pod fields a kubelet fills in; a new container stands for a new pod."""
    field = source["fieldRef"]["fieldPath"]
    if field == "metadata.name":
        return name
    if field == "metadata.uid":
        return str(uuid.uuid4())
    if field == "spec.nodeName":  # every container runs on this host
        return socket.gethostname()
    raise ValueError(f"no stand-in for the downward API's {field}")


def start_pod(name: str, pod: dict, store: VolumeStore, network: str, extra: list[str] = (),
              hostname: str | None = None, address: str | None = None, dns: str | None = None) -> str:
    options, image = run_args(name, pod, store, network, hostname, address, dns)
    try:
        return podman(*options, *extra, *image).stdout.strip()
    except PodmanError:
        # A `run` that fails at start leaves the container created; the caller never got its id.
        podman("rm", "-f", name, check=False)
        raise
