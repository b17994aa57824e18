"""Secret builders. They take key material; generating it is soperator.keys' job."""
from __future__ import annotations

import base64

from soperator.api.cluster import SlurmCluster
from soperator.keys import SshHostKey
from soperator.render.common import Obj, metadata, object_name
from soperator.render.paths import MUNGE_KEY_FILE, SSH_HOST_KEY_TYPES


def munge_key_secret_name(cluster: SlurmCluster) -> str:
    return cluster.spec.secrets.munge_key or object_name(cluster, "munge-key")


def ssh_host_keys_secret_name(cluster: SlurmCluster) -> str:
    return cluster.spec.secrets.ssh_host_keys or object_name(cluster, "ssh-host-keys")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def munge_key_secret(cluster: SlurmCluster, key: bytes) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(cluster, munge_key_secret_name(cluster), "munge"),
        "type": "Opaque",
        "immutable": True,
        "data": {MUNGE_KEY_FILE: _b64(key)},
    }


def ssh_host_keys_secret(cluster: SlurmCluster, keys: dict[str, SshHostKey]) -> Obj:
    missing = [t for t in SSH_HOST_KEY_TYPES if t not in keys]
    if missing:
        raise ValueError(f"ssh host keys missing for types: {', '.join(missing)}")
    data = {}
    for key_type in SSH_HOST_KEY_TYPES:
        data[f"ssh_host_{key_type}_key"] = _b64(keys[key_type].private.encode())
        data[f"ssh_host_{key_type}_key.pub"] = _b64(keys[key_type].public.encode() + b"\n")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(cluster, ssh_host_keys_secret_name(cluster), "login"),
        "type": "Opaque",
        "immutable": True,
        "data": dict(sorted(data.items())),
    }
