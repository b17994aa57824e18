"""A SlurmCluster's own Slurm client: its slurmrestd Service, with tokens signed by its JWT key Secret."""
from __future__ import annotations

import base64

from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.node.layout import JWT_KEY_FILE
from soperator.render.controller import rest_url
from soperator.render.secrets import jwt_key_secret_name
from soperator.slurm.client import SlurmRestClient
from soperator.slurm.token import mint_token


def connect_in_cluster(kube: Kube, cluster: SlurmCluster, controller_ready: bool) -> SlurmRestClient | str:
    """The cluster's slurmrestd Service, with tokens signed by its JWT key Secret."""
    if not controller_ready:
        return "the controller is not ready"
    secret = kube.get("v1", "Secret", cluster.namespace, jwt_key_secret_name(cluster)) or {}
    encoded = (secret.get("data") or {}).get(JWT_KEY_FILE)
    if not encoded:
        return f"Secret {jwt_key_secret_name(cluster)} has no {JWT_KEY_FILE}"
    key = base64.b64decode(encoded)
    return SlurmRestClient(rest_url(cluster), lambda: mint_token(key))
