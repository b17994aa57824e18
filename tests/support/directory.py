"""A throwaway LDAP directory for the identity tests: Debian's slapd, speaking TLS with a CA of the test's
own, users with posixAccount and ssh keys (our small openssh-lpk schema), groups with memberUid.

The test owns the process (started here, stopped by PID) and its directory; slapd listens on the
address the test gives (loopback, or the host side of the test's own podman network) and on a unix
socket the test administers the directory through, with Debian's ldap-utils.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.wait import until
from tests.support.processes import stop

SUFFIX = "dc=soperator,dc=test"
ADMIN_DN = f"cn=admin,{SUFFIX}"
ADMIN_PASSWORD = "directory-admin"
# The bind account the cluster's SSSD uses: only it (and the admin) may read the tree.
READER_DN = f"cn=reader,{SUFFIX}"
READER_PASSWORD = "reader-secret"
# openssh-lpk's attribute and class (the OIDs the OpenSSH LDAP patch registered); Debian ships no schema.
LPK_SCHEMA = """attributetype ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey'
  DESC 'OpenSSH public key' EQUALITY octetStringMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
objectclass ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY
  DESC 'OpenSSH LPK objectclass' MUST uid MAY sshPublicKey )
"""
SLAPD_CONF = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
include {dir}/openssh-lpk.schema
pidfile {dir}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCACertificateFile {dir}/ca.crt
TLSCertificateFile {dir}/server.crt
TLSCertificateKeyFile {dir}/server.key
database mdb
suffix "{suffix}"
rootdn "{admin}"
rootpw {admin_password}
directory {dir}/db
maxsize 67108864
index objectClass,uid,uidNumber,gidNumber,memberUid eq
access to attrs=userPassword by anonymous auth by * none
access to * by dn.exact="{reader}" read by * none
"""


def _cert(subject: str, key, issuer_key, issuer_name, ca: bool, names: list[x509.GeneralName] = ()) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass
class User:
    name: str
    uid: int
    gid: int
    ssh_key: str  # one authorized_keys line


class Directory:
    """`address`: where slapd listens; `host`: the name its certificate is for and clients use (the
    address itself by default)."""

    def __init__(self, root: Path, address: str, port: int, host: str | None = None,
                 starttls_port: int | None = None):
        self.root, self.address, self.port, self.host = root, address, port, host or address
        self.starttls_port = starttls_port  # also plain LDAP there, for StartTLS
        self.socket = root / "ldapi.sock"
        self.proc: subprocess.Popen | None = None
        self.ca_pem = b""

    @property
    def uri(self) -> str:
        return f"ldaps://{self.host}:{self.port}"

    @property
    def starttls_uri(self) -> str:
        return f"ldap://{self.host}:{self.starttls_port}"

    def _write_files(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "db").mkdir(exist_ok=True)
        ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        ca = _cert("soperator test CA", ca_key, ca_key, None, ca=True)
        names = [x509.IPAddress(ipaddress.ip_address(self.address))]
        if self.host != self.address:
            names.append(x509.DNSName(self.host))
        server = _cert(self.host, server_key, ca_key, ca.subject, ca=False, names=names)
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        (self.root / "ca.crt").write_bytes(self.ca_pem)
        (self.root / "server.crt").write_bytes(server.public_bytes(serialization.Encoding.PEM))
        (self.root / "server.key").write_bytes(_pem_key(server_key))
        os.chmod(self.root / "server.key", 0o600)
        (self.root / "openssh-lpk.schema").write_text(LPK_SCHEMA)
        (self.root / "slapd.conf").write_text(SLAPD_CONF.format(
            dir=self.root, suffix=SUFFIX, admin=ADMIN_DN, admin_password=ADMIN_PASSWORD, reader=READER_DN))

    def start(self) -> None:
        if not (self.root / "slapd.conf").exists():
            self._write_files()
        ldapi = "ldapi://" + str(self.socket).replace("/", "%2F")
        urls = [f"ldaps://{self.address}:{self.port}/", ldapi]
        if self.starttls_port:
            urls.append(f"ldap://{self.address}:{self.starttls_port}/")
        # -d 0: in the foreground, this process (stopped by its PID), logging nothing but errors.
        self.proc = subprocess.Popen(
            ["slapd", "-d", "0", "-f", str(self.root / "slapd.conf"), "-h", " ".join(urls)],
            stdout=subprocess.DEVNULL, stderr=open(self.root / "slapd.log", "ab"))
        until(lambda: self.proc.poll() is not None or self._answers(), 30, "slapd to answer")
        if self.proc.poll() is not None:
            raise RuntimeError(f"slapd exited: {(self.root / 'slapd.log').read_text()[-2000:]}")

    def _answers(self) -> bool:
        return self.ldap("ldapsearch", "-b", SUFFIX, "-s", "base", check=False).returncode in (0, 32)

    def stop(self) -> None:
        """The outage: slapd gone, as a server that dies."""
        stop(self.proc)
        self.proc = None

    def ldap(self, tool: str, *args: str, ldif: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """An ldap-utils tool as the directory's admin, over the unix socket."""
        argv = [tool, "-x", "-H", "ldapi://" + str(self.socket).replace("/", "%2F"), "-D", ADMIN_DN,
                "-w", ADMIN_PASSWORD, *args]
        proc = subprocess.run(argv, input=ldif, capture_output=True, text=True, timeout=30)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: rc {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def seed(self) -> None:
        """The tree, and the reader account the cluster binds with."""
        self.ldap("ldapadd", ldif=f"""dn: {SUFFIX}
objectClass: dcObject
objectClass: organization
o: soperator test
dc: soperator

dn: ou=people,{SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{SUFFIX}
objectClass: organizationalUnit
ou: groups

dn: {READER_DN}
objectClass: simpleSecurityObject
objectClass: organizationalRole
cn: reader
userPassword: {READER_PASSWORD}
""")

    def add_group(self, name: str, gid: int, members: list[str] = ()) -> None:
        lines = "".join(f"memberUid: {m}\n" for m in members)
        self.ldap("ldapadd", ldif=f"dn: cn={name},ou=groups,{SUFFIX}\nobjectClass: posixGroup\ncn: {name}\n"
                                  f"gidNumber: {gid}\n{lines}")

    def add_member(self, group: str, user: str) -> None:
        self.ldap("ldapmodify", ldif=f"dn: cn={group},ou=groups,{SUFFIX}\nchangetype: modify\nadd: memberUid\n"
                                     f"memberUid: {user}\n")

    def add_user(self, user: User) -> None:
        self.ldap("ldapadd", ldif=f"""dn: uid={user.name},ou=people,{SUFFIX}
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: {user.name}
cn: {user.name}
sn: {user.name}
uidNumber: {user.uid}
gidNumber: {user.gid}
homeDirectory: /home/{user.name}
loginShell: /bin/bash
sshPublicKey: {user.ssh_key}
""")

    def remove_user(self, name: str) -> None:
        self.ldap("ldapdelete", f"uid={name},ou=people,{SUFFIX}")


def started(root: Path, address: str, port: int, host: str | None = None,
            starttls_port: int | None = None) -> Directory:
    directory = Directory(root, address, port, host, starttls_port)
    directory.start()
    try:
        directory.seed()
    except Exception:
        directory.stop()
        raise
    return directory

