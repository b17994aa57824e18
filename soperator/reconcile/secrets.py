"""Key Secrets: generated once when absent, never regenerated, never overwritten."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
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
        if kube.get("v1", "Secret", cluster.namespace, name) is not None:
            continue
        if user_ref:
            return Cond("SecretsReady", False, "SecretNotFound",
                        f"Secret {cluster.namespace}/{name} named in the spec does not exist")
        create_once(kube, build())
    extra = ", accounting database password" if accounting.enabled else ""
    return Cond("SecretsReady", True, "Present", f"munge key, ssh host keys, JWT key{extra} present")
