"""Key Secrets: generated once when absent, never regenerated, never overwritten.

A Secret under a default name (`<cluster>-munge-key`…) is used only if soperator made it for this
SlurmCluster (an owner reference to its uid): whoever may create Secrets in the namespace but not read
them could otherwise plant keys they know before the cluster exists, and every node would trust them.
A Secret the spec names (`spec.secrets`) is the admin's own and used as it is."""
from __future__ import annotations

from soperator.api.cluster import KIND, SlurmCluster
from soperator.keys import generate_db_password, generate_jwt_key, generate_munge_key, generate_ssh_host_keys
from soperator.kube import Kube
from soperator.reconcile.apply import create_once
from soperator.reconcile.conditions import Cond
from soperator.render.secrets import (db_password_secret, db_password_secret_name, jwt_key_secret, jwt_key_secret_name, munge_key_secret,
                                      munge_key_secret_name, ssh_host_keys_secret, ssh_host_keys_secret_name)


def ensure_secrets(kube: Kube, cluster: SlurmCluster) -> Cond:
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
        existing = kube.get("v1", "Secret", cluster.namespace, name)
        if existing is not None:
            if not user_ref and not made_for(existing, cluster):
                return Cond("SecretsReady", False, "SecretNotOurs", not_ours_message(cluster, name))
            continue
        if user_ref:
            return Cond("SecretsReady", False, "SecretNotFound",
                        f"Secret {cluster.namespace}/{name} named in the spec does not exist")
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
