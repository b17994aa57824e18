"""The metrics client of a cluster lives as long as its REST client (one per cluster identity, kept
across passes by slurm.cluster_client.SlurmClients): no new connection pool every reconcile pass."""
from __future__ import annotations

import gc

from soperator.slurm import SlurmRestClient
from soperator.slurm.ctld_metrics import _kept, metrics_client


def _rest() -> SlurmRestClient:
    return SlurmRestClient("http://rest.invalid:6820", lambda: "token")


def test_one_metrics_client_per_rest_client_and_url():
    rest = _rest()
    first = metrics_client(rest, "http://ctld.invalid:6817")
    assert metrics_client(rest, "http://ctld.invalid:6817/") is first
    assert first._token is rest.token
    moved = metrics_client(rest, "http://ctld2.invalid:6817")  # the controller's address changed
    assert moved is not first and metrics_client(rest, "http://ctld2.invalid:6817") is moved
    assert metrics_client(_rest(), "http://ctld2.invalid:6817") is not moved  # another cluster identity


def test_a_dropped_rest_client_takes_its_metrics_client_with_it():
    rest = _rest()
    metrics_client(rest, "http://ctld.invalid:6817")
    before = len(_kept)
    del rest
    gc.collect()
    assert len(_kept) == before - 1
