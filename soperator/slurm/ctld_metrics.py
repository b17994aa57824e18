"""A small typed client of slurmctld's own metrics (Slurm 25.11+, `MetricsType=metrics/openmetrics`):
GET /metrics/<set> on slurmctld's RPC port, in the Prometheus text format.

With PrivateData set (soperator sets it) slurmctld answers only root, SlurmUser and the users of
MetricsAuthUsers, each with a JWT. So Prometheus does not scrape slurmctld: the operator does, with
its short-lived SlurmUser token, when Prometheus scrapes the operator (soperator/metrics/slurm.py).
No long-lived token exists for a scraper to leak, and users in the jail cannot read other users'
job counts from the controller's port.

Every failure raises, as the REST client's do: Slurm's figures are either all there or unknown.
"""
from __future__ import annotations

import threading
from typing import Callable
from weakref import WeakKeyDictionary

import urllib3
from prometheus_client import Metric
from prometheus_client.parser import text_string_to_metric_families

from soperator.slurm.client import (TOKEN_HEADER, SlurmApiError, SlurmAuthError, SlurmRestClient, SlurmUnreachable,
                                    read_pool)

# The bounded sets. /metrics/jobs-users-accts is left out: a series per user and account, which
# Slurm's own guide advises against storing.
METRIC_SETS = ("jobs", "nodes", "partitions", "scheduler")


class SlurmMetricsClient:
    def __init__(self, base_url: str, token: Callable[[], str], timeout: float = 10.0, retries: int = 2):
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._pool = read_pool(timeout, retries)
        self.calls = 0
        self.bytes_received = 0

    def scrape(self, metric_set: str) -> list[Metric]:
        """One set's metric families, as slurmctld names them (`slurm_…`)."""
        self.calls += 1
        path = f"/metrics/{metric_set}"
        try:
            reply = self._pool.request("GET", self.base_url + path, headers={TOKEN_HEADER: self._token()})
        except urllib3.exceptions.HTTPError as exc:
            raise SlurmUnreachable(f"slurmctld at {self.base_url}: {exc}") from None
        self.bytes_received += len(reply.data)
        text = reply.data.decode(errors="replace")
        if reply.status in (401, 403):
            raise SlurmAuthError(f"slurmctld refused GET {path}: {text.strip()[-200:]}")
        if reply.status != 200:
            raise SlurmApiError(f"slurmctld answered GET {path} with {reply.status}: {text.strip()[-200:]}")
        try:
            return list(text_string_to_metric_families(text))
        except ValueError as exc:
            raise SlurmApiError(f"GET {path}: not the Prometheus text format: {exc}") from None

    def scrape_all(self) -> list[Metric]:
        return [family for metric_set in METRIC_SETS for family in self.scrape(metric_set)]


_kept: WeakKeyDictionary[SlurmRestClient, SlurmMetricsClient] = WeakKeyDictionary()
_kept_lock = threading.Lock()


def metrics_client(rest: SlurmRestClient, url: str) -> SlurmMetricsClient:
    """The metrics client of the cluster `rest` reads, with its token: one per REST client, so kept as
    long as slurm.cluster_client.SlurmClients keeps that (its connections too), and made anew with it."""
    with _kept_lock:
        kept = _kept.get(rest)
        if kept is None or kept.base_url != url.rstrip("/"):
            kept = _kept[rest] = SlurmMetricsClient(url, rest.token)
        return kept
