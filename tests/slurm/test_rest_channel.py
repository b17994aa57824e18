"""The operator's channel to Slurm against the real slurmrestd and slurmctld (26.05, auth/jwt, data
parser v0.0.44): its tokens are accepted, anyone else's are not, every failure is an error, never an
empty answer, and an unchanged cluster is answered with no body."""
from __future__ import annotations

import time

import pytest

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from soperator.render.controller import controller_stateful_set
from soperator.render.worker import worker_stateful_set
from soperator.slurm import SlurmAuthError, SlurmError, SlurmRestClient, SlurmUnreachable, mint_token
from soperator.slurm.client import API, LEGACY_API
from soperator.slurm.cluster_client import rest_api
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.rest_slurm import REGISTERED
from tests.support.slurm import SlurmSandbox, node_image
from tests.support.thin_jail import make_thin_jail
from tests.support.wait import until

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


def test_an_unchanged_cluster_is_answered_with_no_body_and_a_change_with_the_list(rest_slurm):
    client = _client(rest_slurm)

    def quiet() -> bool:
        """A second list right after the first gets no body (304), as long as nothing changed in
        between or in the second before the first (slurmctld compares whole seconds)."""
        first, before = client.list_nodes(), client.bytes_received
        return client.list_nodes() == first and client.bytes_received == before
    until(quiet, 10, "an unchanged node list answered with no body")
    before = client.bytes_received
    rest_slurm.run("scontrol", "update", f"NodeName={REGISTERED}", "State=DRAIN", "Reason=quiet-poll-test")
    try:
        changed = {n.name: n for n in client.list_nodes()}
        assert client.bytes_received > before
        assert changed[REGISTERED].reason == "quiet-poll-test" and "DRAIN" in changed[REGISTERED].flags
    finally:
        rest_slurm.resume(REGISTERED)
    assert "DRAIN" not in {n.name: n for n in client.list_nodes()}[REGISTERED].flags


def test_a_partly_used_node_is_mixed_as_slurmctld_says(tmp_path):
    """slurmrestd computes MIXED only when asked (naming FUTURE alone drops its default flags)."""
    cluster = make_cluster(name="mix", nodeSets=[{"name": "cpu", "replicas": 1, "cpus": 2}],
                           slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                                        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    key, node = generate_jwt_key(), "mix-cpu-0"
    with SlurmSandbox(tmp_path / "box", slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                      names=[node], slurmd=node, node_conf=worker_node_conf(cluster.spec.node_sets[0]), jwt_key=key,
                      rest=True, jail=make_thin_jail(tmp_path / "jail")) as box:
        assert box.status["ready"], (box.status, box.log("slurmd.log"), box.log("slurmrestd.log"))
        job = box.run("sbatch", "--parsable", "-n1", "--mem=1", "-o", "/dev/null", "--wrap", "sleep 120").stdout.strip()
        forwarder = RestForwarder(str(SlurmSandbox.rest_socket(tmp_path / "box")))
        try:
            client = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0)
            until(lambda: box.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING", 60,
                  f"job {job} to run")
            assert "State=MIXED" in box.run("scontrol", "-o", "show", "node", node).stdout
            assert {n.name: n for n in client.list_nodes()}[node].category() == "mixed"
        finally:
            forwarder.close()
            box.run("scancel", job)


def test_no_user_can_mint_a_token(rest_slurm):
    """Only the key's holders sign tokens: `scontrol token` is refused to users (root may; it holds the key)."""
    refused = rest_slurm.box.run("runuser", "-u", "nobody", "--", "scontrol", "token", "lifespan=86400")
    assert refused.returncode != 0 and "SLURM_JWT" not in refused.stdout, (refused.stdout, refused.stderr)
    assert "denied" in refused.stderr.lower(), refused.stderr
    assert rest_slurm.run("scontrol", "token", "lifespan=60").startswith("SLURM_JWT=")


# What the kubelet does with an httpGet probe: any status from 200 to 399 is a pass.
PROBE = """import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}{sys.argv[2]}", timeout=5) as reply:
    print(reply.status)"""


def test_the_daemons_answer_their_pods_probes_with_no_token(rest_slurm):
    """The controller's and the workers' probes, as rendered, against the real slurmctld and slurmd."""
    cluster = rest_slurm.cluster
    containers = [controller_stateful_set(cluster)["spec"]["template"]["spec"]["containers"][0],
                  worker_stateful_set(cluster, cluster.spec.node_sets[0], 1)["spec"]["template"]["spec"]["containers"][0]]
    asked = []
    for container in containers:
        for kind in ("readinessProbe", "livenessProbe"):
            get = container[kind]["httpGet"]
            status = rest_slurm.run("python3", "-c", PROBE, str(get["port"]), get["path"]).strip()
            asked.append((get["path"], status))
    assert asked == [("/readyz", "204"), ("/livez", "204")] * 2


def test_a_24_11_slurmctld_is_read_and_acted_on_through_v0_0_42(tmp_path):
    """A cluster still on Slurm 24.11 (one being upgraded, until its slurmctld moves) serves v0.0.40 to
    v0.0.42 only: the operator's client for it (slurm.cluster_client.rest_api) lists its nodes, FUTURE
    placeholders and partly used nodes as they are, its jobs, and drains and resumes, on the real 24.11
    slurmctld and slurmrestd (Debian trixie's, images/build.py --slurm 24.11); v0.0.44 is not there."""
    cluster = make_cluster(name="old", slurmVersion="24.11", nodeSets=[{"name": "cpu", "replicas": 1, "cpus": 2}],
                           slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                                        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    key, node = generate_jwt_key(), "old-cpu-0"
    with SlurmSandbox(tmp_path / "box", slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                      names=[node], slurmd=node, node_conf=worker_node_conf(cluster.spec.node_sets[0]), jwt_key=key,
                      rest=True, jail=make_thin_jail(tmp_path / "jail"), image=node_image(release="24.11")) as box:
        assert box.status["ready"], (box.status, box.log("slurmd.log"), box.log("slurmrestd.log"))
        assert "24.11" in box.run("sinfo", "--version").stdout
        forwarder, job = RestForwarder(str(SlurmSandbox.rest_socket(tmp_path / "box"))), ""
        try:
            assert rest_api("24.11") == LEGACY_API and rest_api("26.05") == API
            client = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0, api=rest_api("24.11"))
            nodes = {n.name: n for n in client.list_nodes()}
            assert nodes[node].category() == "idle" and nodes["old-cpu-future"].category() == "notRegistered"
            job = box.run("sbatch", "--parsable", "-n1", "--mem=1", "-o", "/dev/null", "--wrap", "sleep 120").stdout.strip()
            until(lambda: box.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING", 60,
                  f"job {job} to run")
            assert {n.name: n for n in client.list_nodes()}[node].category() == "mixed"
            assert [(j.job_id, j.nodes, j.running()) for j in client.list_jobs()] == [(int(job), [node], True)]
            client.drain(node, "soperator: test")
            assert "DRAIN" in box.run("scontrol", "-o", "show", "node", node).stdout
            assert {n.name: n for n in client.list_nodes()}[node].category() == "draining"
            client.resume(node)
            assert "DRAIN" not in box.run("scontrol", "-o", "show", "node", node).stdout
            newer = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0)
            with pytest.raises(SlurmError):
                newer.list_nodes()
        finally:
            forwarder.close()
            if job:
                box.run("scancel", job)
