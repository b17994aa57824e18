"""The operator's channel to Slurm against the real slurmrestd and slurmctld (24.11, auth/jwt): its
tokens are accepted, anyone else's are not, and every failure is an error, never an empty answer."""
from __future__ import annotations

import time

import pytest

from soperator.keys import generate_jwt_key
from soperator.slurm import SlurmAuthError, SlurmRestClient, SlurmUnreachable, mint_token
from tests.support.rest_forward import RestForwarder
from tests.support.rest_slurm import REGISTERED

pytestmark = pytest.mark.slurm


def _client(rest_slurm, key=None, **token_args) -> SlurmRestClient:
    return SlurmRestClient(rest_slurm.url, lambda: mint_token(key or rest_slurm.key, **token_args), retries=0)


def test_a_token_from_the_operator_lists_the_nodes(rest_slurm):
    nodes = {n.name: n for n in _client(rest_slurm).list_nodes()}
    assert nodes[REGISTERED].category() == "idle"
    assert nodes[REGISTERED].features == ["cpu", "ib"]


@pytest.mark.parametrize("how", ["another key", "expired", "root instead of SlurmUser, other key"])
def test_a_token_slurmctld_cannot_verify_is_refused(rest_slurm, how):
    args = {"another key": {"key": generate_jwt_key()},
            "expired": {"now": time.time() - 3600},
            "root instead of SlurmUser, other key": {"key": generate_jwt_key(), "user": "root"}}[how]
    with pytest.raises(SlurmAuthError, match="refused"):
        _client(rest_slurm, **args).list_nodes()


def test_future_records_are_listed_as_not_registered(rest_slurm):
    rest_slurm.run("scontrol", "create", "NodeName=rest-big-[5-7]", "State=FUTURE", "Feature=big")
    try:
        nodes = {n.name: n.category() for n in _client(rest_slurm).list_nodes()}
        assert {nodes[f"rest-big-{i}"] for i in (5, 6, 7)} == {"notRegistered"}
    finally:
        rest_slurm.run("scontrol", "delete", "NodeName=rest-big-[5-7]")


def test_nothing_listening_is_unreachable_not_an_empty_list(tmp_path):
    forwarder = RestForwarder(str(tmp_path / "no-such.sock"))
    try:
        with pytest.raises(SlurmUnreachable):
            SlurmRestClient(forwarder.url, lambda: "t", retries=1).list_nodes()
    finally:
        forwarder.close()
