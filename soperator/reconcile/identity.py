"""spec.identity's DirectoryReady condition: the operator's own look at the directory, with the
credentials and CA the nodes' SSSD uses. Nothing waits on it: SSSD starts offline when the directory
does not answer and keeps serving the users it has seen, so pods start and cached users log in; the
condition (and its event) says why new users cannot.

One look a minute per cluster at most (reconcile passes come with every event), and at once when
what it depends on changes (the spec's directory, the Secrets' contents)."""
from __future__ import annotations

import base64
import binascii
import hashlib
import time

from soperator.api.cluster import SlurmCluster
from soperator.directory_client import Credentials, look
from soperator.kube import Kube
from soperator.node.identity import credential_problem, credential_value
from soperator.node.layout import BIND_DN_FILE, BIND_PASSWORD_FILE, IDENTITY_CA_FILE
from soperator.reconcile.conditions import Cond

LOOK_EVERY = 60.0
CONDITION = "DirectoryReady"
# (namespace, name) → (when, digest of the inputs, the condition then)
_looked: dict[tuple[str, str], tuple[float, str, Cond]] = {}


class _Missing(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.cond = Cond(CONDITION, False, reason, message)


def _secret_files(kube: Kube, namespace: str, name: str, keys: tuple[str, ...], field: str) -> list[str]:
    secret = kube.get("v1", "Secret", namespace, name)
    if secret is None:
        raise _Missing("SecretMissing", f"spec.identity.ldap.{field}: Secret {namespace}/{name} does not exist "
                                        "(the nodes cannot start SSSD without it)")
    data = secret.get("data") or {}
    values = []
    for key in keys:
        try:
            values.append(base64.b64decode(data[key], validate=True).decode())
        except KeyError:
            raise _Missing("SecretMissing", f"spec.identity.ldap.{field}: Secret {namespace}/{name} has no key "
                                            f"{key!r}") from None
        except (binascii.Error, UnicodeDecodeError):
            raise _Missing("SecretInvalid", f"spec.identity.ldap.{field}: Secret {namespace}/{name}: key {key!r} "
                                            "is not UTF-8 text") from None
    return values


def directory_condition(kube: Kube, cluster: SlurmCluster, now: float | None = None) -> Cond | None:
    """None when the cluster takes no users from a directory."""
    identity = cluster.spec.identity
    if identity is None:
        _looked.pop((cluster.namespace, cluster.name), None)
        return None
    ldap = identity.ldap
    try:
        credentials = None
        if ldap.bind_secret:
            keys = (BIND_DN_FILE, BIND_PASSWORD_FILE)
            dn, password = (credential_value(v) for v in _secret_files(kube, cluster.namespace, ldap.bind_secret,
                                                                        keys, "bindSecret"))
            # What the nodes would refuse to put in sssd.conf (soperator/node/identity.py).
            for key, value in zip(keys, (dn, password)):
                problem = credential_problem(key, value)
                if problem:
                    raise _Missing("SecretInvalid", f"spec.identity.ldap.bindSecret: Secret {cluster.namespace}/"
                                                    f"{ldap.bind_secret}: {problem}")
            credentials = Credentials(dn, password)
        ca = _secret_files(kube, cluster.namespace, ldap.ca_secret, (IDENTITY_CA_FILE,), "caSecret")[0] \
            if ldap.ca_secret else None
    except _Missing as missing:
        return missing.cond
    now = time.monotonic() if now is None else now
    digest = hashlib.sha256(repr((ldap.wire(), credentials, ca)).encode()).hexdigest()
    last = _looked.get((cluster.namespace, cluster.name))
    if last and last[1] == digest and now - last[0] < LOOK_EVERY:
        return last[2]
    answer = look(list(ldap.uris), ldap.start_tls, ca, credentials, ldap.search_base)
    cond = Cond(CONDITION, answer.ok, answer.reason, answer.message)
    _looked[(cluster.namespace, cluster.name)] = (now, digest, cond)
    return cond
