"""Key material generation. Kept apart from the renderers, which must stay pure."""
from __future__ import annotations

import os
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

MUNGE_KEY_BYTES = 1024
# HS256: a key as long as the hash (Slurm's guide makes 32 random bytes).
JWT_KEY_BYTES = 32


@dataclass(frozen=True)
class SshHostKey:
    private: str  # OpenSSH PEM
    public: str  # "ssh-ed25519 AAAA..."


def generate_munge_key() -> bytes:
    return os.urandom(MUNGE_KEY_BYTES)


def generate_jwt_key() -> bytes:
    return os.urandom(JWT_KEY_BYTES)


def generate_db_password() -> bytes:
    """Hex: slurmdbd.conf holds it unquoted, and MariaDB takes it as is."""
    return os.urandom(24).hex().encode()


def _host_key(key) -> SshHostKey:
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return SshHostKey(private=private, public=public)


def generate_ssh_host_keys() -> dict[str, SshHostKey]:
    return {
        "ed25519": _host_key(ed25519.Ed25519PrivateKey.generate()),
        "ecdsa": _host_key(ec.generate_private_key(ec.SECP256R1())),
        "rsa": _host_key(rsa.generate_private_key(public_exponent=65537, key_size=3072)),
    }


def _secret_file(directory: str, name: str, generate) -> bytes:
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        _write_private(path, generate())
    with open(path, "rb") as fh:
        return fh.read()


def load_or_create(directory: str) -> tuple[bytes, dict[str, SshHostKey], bytes, bytes]:
    """Keys kept in a directory, created once: repeated renders stay byte-identical.
    Returns (munge key, ssh host keys, JWT key, managed accounting database's password)."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    munge = _secret_file(directory, "munge.key", generate_munge_key)
    jwt_key = _secret_file(directory, "jwt_hs256.key", generate_jwt_key)
    db_password = _secret_file(directory, "db.password", generate_db_password)
    host_keys: dict[str, SshHostKey] = {}
    fresh = None
    for key_type in ("ed25519", "ecdsa", "rsa"):
        path = os.path.join(directory, f"ssh_host_{key_type}_key")
        if not os.path.exists(path):
            fresh = fresh or generate_ssh_host_keys()
            _write_private(path, fresh[key_type].private.encode())
            with open(path + ".pub", "w") as fh:
                fh.write(fresh[key_type].public + "\n")
        with open(path) as priv, open(path + ".pub") as pub:
            host_keys[key_type] = SshHostKey(private=priv.read(), public=pub.read().strip())
    return munge, host_keys, jwt_key, db_password


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
