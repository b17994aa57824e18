"""A SlurmCluster's own Slurm client: its slurmrestd Service, with tokens signed by its JWT key Secret."""
from __future__ import annotations

import base64
import threading

from soperator.api import releases
from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.node.layout import JWT_KEY_FILE
from soperator.render.controller import rest_url
from soperator.render.secrets import jwt_key_secret_name
from soperator.slurm.client import API, LEGACY_API, SlurmRestClient
from soperator.slurm.token import mint_token


def _jwt_key(kube: Kube, cluster: SlurmCluster) -> bytes | str:
    """The cluster's JWT key, or why there is none."""
    secret = kube.get("v1", "Secret", cluster.namespace, jwt_key_secret_name(cluster)) or {}
    encoded = (secret.get("data") or {}).get(JWT_KEY_FILE)
    if not encoded:
        return f"Secret {jwt_key_secret_name(cluster)} has no {JWT_KEY_FILE}"
    return base64.b64decode(encoded)


def rest_api(release: str) -> str:
    """The data parser slurmrestd of `release` serves that the operator reads: v0.0.44 from 25.11."""
    return API if releases.at_least(release, releases.DATA_PARSER_V0_0_44) else LEGACY_API


def connect_in_cluster(kube: Kube, cluster: SlurmCluster, controller_ready: bool) -> SlurmRestClient | str:
    """A new client of the cluster's slurmrestd Service (none kept), or the reason there is none yet."""
    return SlurmClients().connect(kube, cluster, controller_ready)


class SlurmClients:
    """One client per cluster, kept from pass to pass (and shared with the metrics scrapes), so its
    node list is asked for only as of its last answer. A cluster made again under its name (another
    uid), or whose key, Service address or Slurm release (`cluster.spec.slurmVersion`: the release its
    slurmctld runs, which picks the data parser) changed, gets a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], tuple[tuple[str, str, bytes, str], SlurmRestClient]] = {}
        self._elastic: set[tuple[str, str]] = set()  # clusters with an autoscaling node set, as of their last pass

    def connect(self, kube: Kube, cluster: SlurmCluster, controller_ready: bool) -> SlurmRestClient | str:
        if not controller_ready:
            return "the controller is not ready"
        key = _jwt_key(kube, cluster)
        if isinstance(key, str):
            return key
        api = rest_api(cluster.spec.slurm_version)
        identity = (cluster.metadata.uid or "", rest_url(cluster), key, api)
        where = (cluster.namespace, cluster.name)
        with self._lock:
            kept = self._clients.get(where)
            if kept is None or kept[0] != identity:
                kept = (identity, SlurmRestClient(rest_url(cluster), lambda: mint_token(key), api=api))
                self._clients[where] = kept
            if any(n.autoscale for n in cluster.spec.node_sets):
                self._elastic.add(where)
            else:
                self._elastic.discard(where)
            return kept[1]

    def elastic(self) -> list[tuple[tuple[str, str], SlurmRestClient]]:
        """(namespace, name) and client of each cluster that autoscaled at its last pass."""
        with self._lock:
            return [(where, self._clients[where][1]) for where in sorted(self._elastic) if where in self._clients]

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._clients.pop((namespace, name), None)
            self._elastic.discard((namespace, name))
