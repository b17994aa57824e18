"""Throw-away PKI for a test control plane: a CA, serving and client certificates, the SA key pair."""
from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


class TestPKI:
    """Files are written under `directory`; attributes hold their paths. A directory that already
    holds them is reused as it is (a second `up` keeps the running cluster's certificates)."""

    def __init__(self, directory: Path, ips: tuple[str, ...] = ("127.0.0.1",)):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        self._valid = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=30))
        if (self.dir / "ca.key").exists():
            self._ca_key = serialization.load_pem_private_key((self.dir / "ca.key").read_bytes(), None)
            self._ca_cert = x509.load_pem_x509_certificate((self.dir / "ca.crt").read_bytes())
            self.ca_cert = self.dir / "ca.crt"
        else:
            self._new_ca()
        self.serving_cert, self.serving_key = self.issue(
            "kube-apiserver", None, ExtendedKeyUsageOID.SERVER_AUTH,
            dns=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local"], ips=list(ips))
        self.admin_cert, self.admin_key = self.issue("soperator-test-admin", "system:masters",
                                                     ExtendedKeyUsageOID.CLIENT_AUTH)
        if not (self.dir / "sa.key").exists():
            sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self._write("sa.key", _key_pem(sa_key))
            self._write("sa.pub", sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        self.sa_key, self.sa_pub = self.dir / "sa.key", self.dir / "sa.pub"

    def _new_ca(self) -> None:
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        self._ca_cert = (x509.CertificateBuilder().subject_name(_name("soperator-test-ca"))
                         .issuer_name(_name("soperator-test-ca")).public_key(self._ca_key.public_key())
                         .serial_number(x509.random_serial_number())
                         .not_valid_before(self._valid[0]).not_valid_after(self._valid[1])
                         .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                         .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False,
                                                      False), critical=True)
                         .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._ca_key.public_key()),
                                        critical=False)
                         .sign(self._ca_key, hashes.SHA256()))
        self.ca_cert = self._write("ca.crt", self._ca_cert.public_bytes(serialization.Encoding.PEM))
        self._write("ca.key", _key_pem(self._ca_key))

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def issue(self, cn: str, org: str | None, usage, dns=(), ips=()) -> tuple[Path, Path]:
        """A certificate and key named after `cn`, made once."""
        cert_path, key_path = self.dir / f"{cn}.crt", self.dir / f"{cn}.key"
        if cert_path.exists() and key_path.exists():
            return cert_path, key_path
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(self._ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(self._valid[0]).not_valid_after(self._valid[1])
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   # Python 3.13's default TLS context checks X.509 strictly: the key identifiers must be there.
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key.public_key()),
                                  critical=False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return (self._write(f"{cn}.crt", cert.public_bytes(serialization.Encoding.PEM)),
                self._write(f"{cn}.key", _key_pem(key)))
