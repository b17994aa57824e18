"""Who may read /metrics, and over what: the kube-rbac-proxy model, in process.

A scraper sends a bearer token; the apiserver says whose it is (TokenReview) and whether RBAC lets
that user `get` the non-resource URL /metrics (SubjectAccessReview). Answers are cached briefly, so a
scrape every few seconds costs no API calls. Tokens travel over TLS: a certificate from a directory
(cert-manager's tls.crt/tls.key) or, by default, a self-signed one made at start, as controller-runtime
does; scrapers then skip verification or pin it.
"""
from __future__ import annotations

import datetime
import hashlib
import ssl
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes.client.exceptions import ApiException

from soperator.kube import Kube

CACHE_SECONDS = 60
CACHE_ENTRIES = 1024
# TokenReviews for tokens the cache does not hold, whatever they are: a flood of made-up tokens costs
# the apiserver at most this many calls a second (beyond the burst), and is answered 429 meanwhile.
REVIEWS_PER_SECOND = 5.0
REVIEW_BURST = 20


class TokenGate:
    def __init__(self, kube: Kube, path: str = "/metrics", entries: int = CACHE_ENTRIES,
                 reviews_per_second: float = REVIEWS_PER_SECOND, burst: int = REVIEW_BURST):
        self.kube, self.path = kube, path
        self._lock = threading.Lock()
        # sha256(token) -> (expiry, HTTP status), least recently used first: a full cache drops its
        # oldest answer, never all of them (a wipe would send every scraper back to the apiserver).
        self._answers: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._entries = entries
        self._rate, self._burst = reviews_per_second, burst
        self._allowance, self._checked = float(burst), time.monotonic()

    def status_for(self, authorization: str | None) -> int:
        """200, 401 (no or invalid token), 403 (valid, not allowed), 429 (too many unknown tokens of late)
        or 503 (the apiserver did not answer)."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401
        key = hashlib.sha256(token.strip().encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            cached = self._answers.get(key)
            if cached and cached[0] > now:
                self._answers.move_to_end(key)
                return cached[1]
            if not self._spend_review(now):
                return 429  # not cached: once the budget refills, the token is reviewed
        try:
            who = self.kube.review_token(token.strip())
            status = 401 if who is None else 200 if self.kube.may_get_path(*who, self.path) else 403
        except ApiException:
            return 503  # not cached: the next scrape asks again
        with self._lock:
            self._answers[key] = (now + CACHE_SECONDS, status)
            self._answers.move_to_end(key)
            while len(self._answers) > self._entries:
                self._answers.popitem(last=False)
        return status

    def _spend_review(self, now: float) -> bool:
        """A token bucket: `rate` reviews a second, `burst` at once."""
        self._allowance = min(self._burst, self._allowance + (now - self._checked) * self._rate)
        self._checked = now
        if self._allowance < 1:
            return False
        self._allowance -= 1
        return True

    @property
    def cached(self) -> int:
        return len(self._answers)


def server_context(cert_dir: str | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir:
        context.load_cert_chain(Path(cert_dir) / "tls.crt", Path(cert_dir) / "tls.key")
        return context
    with tempfile.TemporaryDirectory(prefix="soperator-metrics-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        _write_self_signed(cert, key)
        context.load_cert_chain(cert, key)  # read now; the files go with the directory
    return context


def _write_self_signed(cert_path: Path, key_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "soperator-metrics")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365)).sign(key, hashes.SHA256()))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
