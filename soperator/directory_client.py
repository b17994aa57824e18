"""The operator's one look at spec.identity's directory: can it be reached over TLS with a certificate
that checks out, does it take the bind, and is the search base there. The answer becomes the
DirectoryReady condition (reconcile/identity.py); SSSD on the nodes does the real lookups.

ldap3 (pure Python) speaks LDAP; the certificate is checked with Python's ssl against the spec's CA,
or the operator image's public CAs, and must name the host of the URI.
"""
from __future__ import annotations

import re
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from ldap3 import ANONYMOUS, BASE, NONE, SIMPLE, Connection, Server, Tls
from ldap3.core import exceptions as ldap_errors

TIMEOUT = 5  # seconds (whole: ldap3 packs it into SO_RCVTIMEO) per connect and per answer, for each URI in turn
# A look runs inside a reconcile pass: URIs still untried after this long are left out, and named.
BUDGET = 15.0
# A look runs in a reconcile pass: URIs past this are not tried (reported as not tried).
BUDGET = 15.0


@dataclass(frozen=True)
class Credentials:
    dn: str
    password: str


@dataclass(frozen=True)
class Answer:
    ok: bool
    reason: str
    message: str


class _CheckedTls(Tls):
    """ldap3's TLS, with the certificate and its host checked by the standard library's own context
    (names and IP addresses): from Python 3.12 ldap3 falls back to an old copy of match_hostname."""

    def __init__(self, host: str, ca_pem: str | None):
        super().__init__(validate=ssl.CERT_REQUIRED, ca_certs_data=ca_pem)
        self.host = host

    def wrap_socket(self, connection, do_handshake=False):
        # The spec's CA alone when given, else the image's public CAs.
        context = ssl.create_default_context(cadata=self.ca_certs_data)
        # As strict as SSSD's libldap, no stricter: Python 3.13 also asks for RFC 5280 extensions
        # (an Authority Key Identifier) that many site CAs lack and libldap never checks.
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
        connection.socket = context.wrap_socket(connection.socket, server_hostname=self.host,
                                                do_handshake_on_connect=do_handshake)


def _classify(uri: str, exc: Exception, credentials: Credentials | None, base: str) -> Answer:
    who = f"as {credentials.dn}" if credentials else "anonymously"
    if isinstance(exc, ldap_errors.LDAPInvalidCredentialsResult):
        return Answer(False, "BindRejected", f"{uri} refused the bind {who}: invalid credentials (is bindSecret's "
                                             "password right?)")
    if isinstance(exc, ldap_errors.LDAPNoSuchObjectResult):
        return Answer(False, "SearchBaseMissing", f"{uri} shows no entry {base} {who} (searchBase: missing, or "
                                                  "hidden from this bind)")
    if isinstance(exc, (ldap_errors.LDAPInsufficientAccessRightsResult, ldap_errors.LDAPInappropriateAuthenticationResult)):
        return Answer(False, "SearchRefused", f"{uri} refused to show {base} {who}: {exc}")
    # ldap3 nests the ssl module's message in tuples of strings: the message alone.
    ssl_error = re.search(r"\[SSL: [^\]]+\].*?\(_ssl\.c:\d+\)", str(exc))
    text = ssl_error.group(0).replace("\\'", "'") if ssl_error else str(exc)
    if isinstance(exc, ldap_errors.LDAPStartTLSError) or any(w in text.lower() for w in ("ssl", "certificate", "tls")):
        return Answer(False, "DirectoryTlsFailed", f"{uri}: TLS failed (is caSecret the CA that signed the server's "
                                                   f"certificate, and is the certificate for this host?): {text}")
    if isinstance(exc, (ldap_errors.LDAPSocketOpenError, ldap_errors.LDAPSocketReceiveError,
                        ldap_errors.LDAPSessionTerminatedByServerError, ldap_errors.LDAPSocketSendError)):
        return Answer(False, "DirectoryUnreachable", f"{uri} does not answer: {text}")
    return Answer(False, "DirectoryError", f"{uri}: {type(exc).__name__}: {text}")


def _close(conn: Connection) -> None:
    """After a failed TLS handshake the ssl module has closed the socket under ldap3, whose unbind
    then raises: the look's answer stands."""
    try:
        conn.unbind()
    except Exception:  # noqa: BLE001
        pass


def _look(uri: str, start_tls: bool, ca_pem: str | None, credentials: Credentials | None, base: str) -> Answer:
    parts = urlsplit(uri)
    secure = parts.scheme == "ldaps"
    server = Server(parts.hostname, port=parts.port or (636 if secure else 389), use_ssl=secure,
                    tls=_CheckedTls(parts.hostname, ca_pem), connect_timeout=TIMEOUT, get_info=NONE)
    conn = Connection(server, user=credentials.dn if credentials else None,
                      password=credentials.password if credentials else None,
                      authentication=SIMPLE if credentials else ANONYMOUS, receive_timeout=TIMEOUT,
                      raise_exceptions=True, auto_bind=False, read_only=True)
    try:
        conn.open()
        if start_tls and not secure:
            conn.start_tls()
        conn.bind()
        conn.search(base, "(objectClass=*)", search_scope=BASE, attributes=[])
    except Exception as exc:  # noqa: BLE001 - whatever the library raises is this URI's answer, never the pass's
        return _classify(uri, exc, credentials, base)
    finally:
        _close(conn)
    who = f"bound as {credentials.dn}" if credentials else "anonymous"
    return Answer(True, "DirectoryAnswers", f"{uri} answers over TLS ({who}); {base} is there")


def look(uris: list[str], start_tls: bool, ca_pem: str | None, credentials: Credentials | None,
         base: str) -> Answer:
    """The first URI that answers in full, as SSSD fails over; else every URI's failure, the first's
    reason."""
    failures, started = [], time.monotonic()
    for i, uri in enumerate(uris):
        if failures and time.monotonic() - started > BUDGET:
            failures.append(Answer(False, "", f"not tried (the look took {BUDGET:.0f} s): {', '.join(uris[i:])}"))
            break
        answer = _look(uri, start_tls, ca_pem, credentials, base)
        if answer.ok:
            return answer
        failures.append(answer)
    return Answer(False, failures[0].reason, "; ".join(f.message for f in failures))
