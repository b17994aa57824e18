"""Secret builders. They take key material; generating it is soperator.keys' job."""
from __future__ import annotations

import base64

from soperator.api.cluster import SlurmCluster
from soperator.keys import SshHostKey
from soperator.node.layout import (CONTROLLER, DATABASE, DB_PASSWORD_FILE, JWT_KEY_FILE, LOGIN, MUNGE, MUNGE_KEY_FILE,
                                   NAMES, SSH_HOST_KEY_TYPES)
from soperator.render.common import Obj, metadata, object_name


def munge_key_secret_name(cluster: SlurmCluster) -> str:
    return cluster.spec.secrets.munge_key or object_name(cluster, NAMES.munge_key)


def ssh_host_keys_secret_name(cluster: SlurmCluster) -> str:
    return cluster.spec.secrets.ssh_host_keys or object_name(cluster, NAMES.ssh_host_keys)


def jwt_key_secret_name(cluster: SlurmCluster) -> str:
    return cluster.spec.secrets.jwt_key or object_name(cluster, NAMES.jwt_key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _key_secret(cluster: SlurmCluster, name: str, component: str, files: dict[str, bytes]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(cluster, name, component),
        "type": "Opaque",
        "immutable": True,
        "data": {f: _b64(content) for f, content in sorted(files.items())},
    }


def munge_key_secret(cluster: SlurmCluster, key: bytes) -> Obj:
    return _key_secret(cluster, munge_key_secret_name(cluster), MUNGE, {MUNGE_KEY_FILE: key})


def jwt_key_secret(cluster: SlurmCluster, key: bytes) -> Obj:
    """The HS256 key slurmctld checks slurmrestd callers' tokens with, and the operator signs them with."""
    return _key_secret(cluster, jwt_key_secret_name(cluster), CONTROLLER, {JWT_KEY_FILE: key})


def ssh_host_keys_secret(cluster: SlurmCluster, keys: dict[str, SshHostKey]) -> Obj:
    missing = [t for t in SSH_HOST_KEY_TYPES if t not in keys]
    if missing:
        raise ValueError(f"ssh host keys missing for types: {', '.join(missing)}")
    files = {}
    for key_type in SSH_HOST_KEY_TYPES:
        files[f"ssh_host_{key_type}_key"] = keys[key_type].private.encode()
        files[f"ssh_host_{key_type}_key.pub"] = keys[key_type].public.encode() + b"\n"
    return _key_secret(cluster, ssh_host_keys_secret_name(cluster), LOGIN, files)


def db_password_secret_name(cluster: SlurmCluster) -> str:
    """The accounting database's password: the user's Secret for an external database, else ours."""
    external = cluster.spec.accounting.external
    return external.password_secret if external else object_name(cluster, NAMES.db_password)


def db_password_secret(cluster: SlurmCluster, password: bytes) -> Obj:
    """The managed accounting database's password: generated once, immutable, never rotated by accident."""
    return _key_secret(cluster, db_password_secret_name(cluster), DATABASE, {DB_PASSWORD_FILE: password})
