"""spec.identity's DirectoryReady condition, from the operator's reconcile against the real apiserver
and a real slapd speaking TLS (on loopback): each cause is named, with an event, and none of them
holds anything back (the node pods are rendered all the same: SSSD serves its cache meanwhile)."""
from __future__ import annotations

import base64
import json

import pytest
import yaml

from soperator.kube import Kube
from soperator.reconcile import identity, reconcile
from soperator.reconcile.secrets import secret_label
from tests.cluster.controlplane import free_port
from tests.support.directory import READER_DN, READER_PASSWORD, SUFFIX, started

pytestmark = pytest.mark.kube
API = "slurm.soperator.dev/v1alpha1"


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    found = started(tmp_path_factory.mktemp("directory"), "127.0.0.1", free_port(), starttls_port=free_port())
    yield found
    found.stop()


def _secret(kubectl, namespace: str, name: str, files: dict[str, str], labelled: bool = True) -> None:
    """As the admin makes it: labelled for use by Slurm clusters (unless `labelled` is False)."""
    key, value = secret_label()
    labels = {key: value} if labelled else {}
    doc = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def _cluster(kubectl, namespace: str, uri: str, base: str = SUFFIX) -> None:
    doc = {"apiVersion": API, "kind": "SlurmCluster", "metadata": {"name": "dir", "namespace": namespace},
           "spec": {"identity": {"ldap": {"uris": [uri], "searchBase": base, "bindSecret": "bind",
                                          "caSecret": "ca", "startTls": uri.startswith("ldap://")}}}}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def _condition(kube: Kube, namespace: str) -> dict:
    identity._looked.clear()  # each step looks again (a pass otherwise reuses a look for a minute)
    reconcile(kube, kube.get(API, "SlurmCluster", namespace, "dir"))
    status = kube.get(API, "SlurmCluster", namespace, "dir")["status"]
    return next(c for c in status["conditions"] if c["type"] == "DirectoryReady")


def test_each_reason_a_directory_cannot_be_used_is_named_with_an_event(api, kubectl, crd_installed, namespace,
                                                                        directory):
    kube = Kube(api)
    _cluster(kubectl, namespace, directory.uri)
    cond = _condition(kube, namespace)
    assert (cond["status"], cond["reason"]) == ("False", "SecretMissing") and f"{namespace}/bind" in cond["message"]

    # Not labelled for Slurm clusters: not used, no bind with it (as every Secret a spec names).
    _secret(kubectl, namespace, "bind", {"username": READER_DN, "password": READER_PASSWORD}, labelled=False)
    identity._looked.clear()
    reconcile(kube, kube.get(API, "SlurmCluster", namespace, "dir"))
    status = kube.get(API, "SlurmCluster", namespace, "dir")["status"]
    refused = next(c for c in status["conditions"] if c["type"] == "SecretsReady")
    assert refused["reason"] == "SecretNotLabelled", refused
    assert refused["message"].startswith(f"spec.identity.ldap.bindSecret: Secret {namespace}/bind "), refused

    _secret(kubectl, namespace, "bind", {"username": READER_DN, "password": READER_PASSWORD})
    cond = _condition(kube, namespace)
    assert cond["reason"] == "SecretMissing" and "caSecret" in cond["message"]

    _secret(kubectl, namespace, "ca", {"ca.crt": directory.ca_pem.decode()})
    cond = _condition(kube, namespace)
    assert (cond["status"], cond["reason"]) == ("True", "DirectoryAnswers"), cond
    # The pods were never held back for it.
    assert kube.get("batch/v1", "Job", namespace, "dir-populate-jail") is not None

    _secret(kubectl, namespace, "bind", {"username": READER_DN, "password": "not-the-password"})
    cond = _condition(kube, namespace)
    assert (cond["status"], cond["reason"]) == ("False", "BindRejected") and READER_DN in cond["message"]
    assert "not-the-password" not in json.dumps(cond)

    # What a node could not put in sssd.conf is refused here too, before any look.
    _secret(kubectl, namespace, "bind", {"username": READER_DN, "password": READER_PASSWORD + " "})
    cond = _condition(kube, namespace)
    assert cond["reason"] == "SecretInvalid" and "trailing spaces" in cond["message"]

    _secret(kubectl, namespace, "bind", {"username": READER_DN, "password": READER_PASSWORD})
    _cluster(kubectl, namespace, directory.uri, base="dc=elsewhere,dc=test")
    cond = _condition(kube, namespace)
    assert cond["reason"] == "SearchBaseMissing" and "dc=elsewhere,dc=test" in cond["message"]

    # StartTLS on plain LDAP: the same certificate check.
    _cluster(kubectl, namespace, directory.starttls_uri)
    cond = _condition(kube, namespace)
    assert (cond["status"], cond["reason"]) == ("True", "DirectoryAnswers") and directory.starttls_uri in cond["message"]

    other = started(directory.root.parent / "other-ca", "127.0.0.1", free_port(), starttls_port=free_port())
    try:  # a CA this cluster does not trust, over LDAPS and over StartTLS
        for uri in (other.uri, other.starttls_uri):
            _cluster(kubectl, namespace, uri)
            cond = _condition(kube, namespace)
            assert cond["reason"] == "DirectoryTlsFailed" and "CERTIFICATE_VERIFY_FAILED" in cond["message"], cond
    finally:
        other.stop()
    _cluster(kubectl, namespace, other.uri)
    cond = _condition(kube, namespace)
    assert cond["reason"] == "DirectoryUnreachable" and other.uri in cond["message"]

    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == "dir"}
    assert {"SecretMissing", "SecretInvalid", "DirectoryAnswers", "BindRejected", "SearchBaseMissing",
            "DirectoryTlsFailed", "DirectoryUnreachable"} <= reasons, reasons
