"""Key Secrets: generated once when absent, never regenerated, never overwritten.

A Secret under a default name (`<cluster>-munge-key`…) is used only if soperator made it for this
SlurmCluster (an owner reference to its uid): whoever may create Secrets in the namespace but not read
them could otherwise plant keys they know before the cluster exists, and every node would trust them.

A Secret the spec names (`spec.secrets`, a database password, pull secrets, enroot credentials, the
directory's bind and CA Secrets) is used only if it carries the label the cluster admin chose
(SOPERATOR_SECRET_LABEL, from the operator chart): whoever may write a SlurmCluster could otherwise
mount any Secret of the namespace into pods they are root in, and read it. The admission policy cannot
see Secrets, so the operator checks."""
from __future__ import annotations

import os

from soperator.api.cluster import KIND, SlurmCluster
from soperator.keys import generate_db_password, generate_jwt_key, generate_munge_key, generate_ssh_host_keys
from soperator.kube import Kube
from soperator.reconcile.apply import create_once
from soperator.reconcile.conditions import Cond
from soperator.render.secrets import (db_password_secret, db_password_secret_name, jwt_key_secret, jwt_key_secret_name, munge_key_secret,
                                      munge_key_secret_name, ssh_host_keys_secret, ssh_host_keys_secret_name)


SECRET_LABEL_ENV = "SOPERATOR_SECRET_LABEL"
DEFAULT_SECRET_LABEL = "slurm.soperator.dev/usable-by-clusters=true"


def secret_label() -> tuple[str, str]:
    """The (key, value) a Secret named in a spec must carry: `key=value` from the operator's setting."""
    key, _, value = (os.environ.get(SECRET_LABEL_ENV) or DEFAULT_SECRET_LABEL).partition("=")
    return key, value


def referenced_secrets(cluster: SlurmCluster) -> list[tuple[str, str]]:
    """(field, Secret name) of every Secret the spec names, in the spec's order."""
    spec = cluster.spec
    refs = [(f"spec.secrets.{field}", getattr(spec.secrets, attr)) for field, attr in (
        ("mungeKey", "munge_key"), ("sshHostKeys", "ssh_host_keys"), ("jwtKey", "jwt_key"))]
    if spec.accounting.enabled and spec.accounting.external:
        refs.append(("spec.accounting.external.passwordSecret", spec.accounting.external.password_secret))
    refs += [(f"spec.images.pullSecrets[{i}]", name) for i, name in enumerate(spec.images.pull_secrets)]
    refs += [(f"spec.nodeSets[{i}].pyxis.registryCredentialsSecret", n.pyxis.registry_credentials_secret)
             for i, n in enumerate(spec.node_sets) if n.pyxis.enabled]
    if spec.identity:
        refs += [(field, getattr(spec.identity.ldap, attr)) for field, attr in DIRECTORY_SECRETS.items()]
    return [(field, name) for field, name in refs if name]


# The directory's Secrets: a missing one is DirectoryReady's to name (the pods are not held back for the
# directory); one present must carry the label like any other, or a SlurmCluster writer could send any
# Secret's password to a server of theirs in the operator's bind, and mount it into pods.
DIRECTORY_SECRETS = {"spec.identity.ldap.bindSecret": "bind_secret", "spec.identity.ldap.caSecret": "ca_secret"}


def check_referenced(kube: Kube, cluster: SlurmCluster) -> Cond | None:
    """The first Secret the spec names that is missing or not labelled for use, as a failed condition."""
    key, value = secret_label()
    for field, name in referenced_secrets(cluster):
        secret = kube.get("v1", "Secret", cluster.namespace, name)
        if secret is None and field in DIRECTORY_SECRETS:
            continue
        if secret is None:
            return Cond("SecretsReady", False, "SecretNotFound",
                        f"{field}: Secret {cluster.namespace}/{name} does not exist")
        labels = secret.get("metadata", {}).get("labels") or {}
        if labels.get(key) != value and not made_for(secret, cluster):
            return Cond("SecretsReady", False, "SecretNotLabelled",
                        f"{field}: Secret {cluster.namespace}/{name} does not carry the label {key}={value}, which the "
                        "cluster admin requires of every Secret a SlurmCluster names (slurm-operator chart values: "
                        "referencedSecretLabel), so it is not used; nothing was changed. Label it if it is meant for "
                        "Slurm clusters")
    return None


def ensure_secrets(kube: Kube, cluster: SlurmCluster) -> Cond:
    refused = check_referenced(kube, cluster)
    if refused:
        return refused
    refs = cluster.spec.secrets
    wanted = [
        (munge_key_secret_name(cluster), refs.munge_key, lambda: munge_key_secret(cluster, generate_munge_key())),
        (ssh_host_keys_secret_name(cluster), refs.ssh_host_keys,
         lambda: ssh_host_keys_secret(cluster, generate_ssh_host_keys())),
        (jwt_key_secret_name(cluster), refs.jwt_key, lambda: jwt_key_secret(cluster, generate_jwt_key())),
    ]
    accounting = cluster.spec.accounting
    if accounting.enabled:
        # An external database's password Secret is the user's: never made here, only required.
        wanted.append((db_password_secret_name(cluster), accounting.external and accounting.external.password_secret,
                       lambda: db_password_secret(cluster, generate_db_password())))
    for name, user_ref, build in wanted:
        if user_ref:
            continue  # the admin's own, checked above
        existing = kube.get("v1", "Secret", cluster.namespace, name)
        if existing is not None:
            if not made_for(existing, cluster):
                return Cond("SecretsReady", False, "SecretNotOurs", not_ours_message(cluster, name))
            continue
        create_once(kube, build())
    extra = ", accounting database password" if accounting.enabled else ""
    return Cond("SecretsReady", True, "Present", f"munge key, ssh host keys, JWT key{extra} present")


def made_for(secret: dict, cluster: SlurmCluster) -> bool:
    """soperator made it for this SlurmCluster: it carries an owner reference to the cluster's uid."""
    refs = secret.get("metadata", {}).get("ownerReferences") or []
    return any(r.get("kind") == KIND and r.get("uid") == cluster.metadata.uid for r in refs)


def not_ours_message(cluster: SlurmCluster, name: str) -> str:
    return (f"Secret {cluster.namespace}/{name} exists but soperator did not make it for this SlurmCluster (no "
            "owner reference to it): its keys would be trusted by every node, so it is not used. Delete it to "
            "let soperator generate one, or name it in spec.secrets to use it as your own")
