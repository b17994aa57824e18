"""Slurm metrics as the operator's /metrics serves them, against the real slurmctld (its own
OpenMetrics) and slurmrestd: at the same moment they equal sinfo's, squeue's and sdiag's counts, every
sample names its cluster, a scrape costs one REST call and one GET per metric set, slurmctld answers
none of it to a user's token, and a Slurm that cannot be read is `slurm_up 0` with no other Slurm series.
The chart's Grafana dashboard asks only for series that exist."""
from __future__ import annotations

import json
import re

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from soperator.metrics import server as metrics
from soperator.metrics.slurm import SlurmCollector, Target
from soperator.render.configs import placeholder_node_name
from soperator.slurm import SlurmAuthError, SlurmRestClient, mint_token
from soperator.slurm.ctld_metrics import METRIC_SETS, SlurmMetricsClient
from tests.support.rest_slurm import NAME, REGISTERED
from tests.support_paths import ROOT
from tests.support.wait import until

pytestmark = pytest.mark.slurm
SINFO = {"idle": "idle", "alloc": "allocated", "mix": "mixed", "drng": "draining", "drain": "drained", "down": "down"}
WHO = {"namespace": "hpc", "cluster": NAME}


def _scrape(rest_slurm, metrics_url: str | None = None) -> tuple[dict[str, list], int, int]:
    """(samples by family, REST calls, metric GETs) of one scrape of the operator's collector."""
    token = lambda: mint_token(rest_slurm.key)  # noqa: E731
    client = SlurmRestClient(rest_slurm.url, token, retries=0)
    ctld = SlurmMetricsClient(metrics_url or rest_slurm.metrics_url, token, retries=0)
    cluster = rest_slurm.cluster
    collector = SlurmCollector()
    collector.track(Target("hpc", NAME, client, ctld, tuple(n.name for n in cluster.spec.node_sets),
                           frozenset(placeholder_node_name(cluster, n) for n in cluster.spec.node_sets)))
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    samples = {f.name: list(f.samples) for f in text_string_to_metric_families(text)}
    return samples, client.calls, ctld.calls


def _one(samples: dict, name: str, **labels: str) -> float:
    """The value of the one sample of `name` whose labels are the cluster's and `labels`."""
    hits = [s.value for s in samples[name] if s.labels == {**WHO, **labels}]
    assert len(hits) == 1, (name, labels, samples.get(name))
    return hits[0]


def test_metrics_equal_sinfo_squeue_and_sdiag_at_the_same_moment(rest_slurm):
    running = rest_slurm.run("sbatch", "--parsable", "-w", REGISTERED, "-o", "/dev/null", "--wrap", "sleep 60").strip()
    waiting = rest_slurm.run("sbatch", "--parsable", "-p", "big", "-o", "/dev/null", "--wrap", "true").strip()
    until(lambda: rest_slurm.job(running)["JobState"] == "RUNNING", 30, "the job to run")
    try:
        samples, calls, gets = _scrape(rest_slurm)
        sinfo = rest_slurm.run("sinfo", "-h", "-N", "-o", "%N %t").split()
        cpus = dict(line.split() for line in rest_slurm.run("sinfo", "-h", "-o", "%R %C").splitlines())
        partitions = [dict(f.split("=", 1) for f in line.split() if "=" in f)
                      for line in rest_slurm.run("scontrol", "-o", "show", "partition").splitlines()]
        submitted = re.search(r"Jobs submitted:\s+(\d+)", rest_slurm.run("sdiag")).group(1)
    finally:
        rest_slurm.run("scancel", running, waiting)
    assert (calls, gets) == (1, len(METRIC_SETS))
    assert [s.labels for s in samples["slurm_up"]] == [WHO] and samples["slurm_up"][0].value == 1
    assert all(set(WHO.items()) <= set(s.labels.items()) for family in samples.values() for s in family)
    # Nodes by node set: sinfo's states; the FUTURE placeholders are not nodes.
    assert sinfo[1] in ("mix", "alloc")
    by_node_set = {(s.labels["node_set"], s.labels["state"]): s.value
                   for s in samples["soperator_node_set_nodes"] if s.value}
    assert by_node_set == {("cpu", SINFO[sinfo[1]]): 1}
    # Slurm's own series: the running job in main, the pending one in big, as squeue has them.
    assert _one(samples, "slurm_partition_jobs_running", partition="main") == 1
    assert _one(samples, "slurm_partition_jobs_pending", partition="big") == 1
    assert _one(samples, "slurm_jobs_running") == 1 and _one(samples, "slurm_jobs_pending") == 1
    # CPUs per partition: allocated as sinfo -o %C; the total as scontrol counts it, FUTURE records
    # (the node sets' placeholders) included, where sinfo leaves them out.
    for partition, text in cpus.items():
        allocated = int(text.split("/")[0])
        assert _one(samples, "slurm_partition_nodes_cpus_alloc", partition=partition) == allocated, partition
    for partition in partitions:
        assert _one(samples, "slurm_partition_cpus", partition=partition["PartitionName"]) == int(partition["TotalCPUs"])
    # sdiag at the same moment (nothing submitted between).
    assert _one(samples, "slurm_sdiag_jobs_submitted") == int(submitted)
    assert _one(samples, "slurm_node_cpus", node=REGISTERED) == 1


@pytest.mark.parametrize("who", ["daemon", "root"])
def test_slurmctld_answers_its_metrics_to_no_user_token(rest_slurm, who):
    """PrivateData holds slurmctld's metrics to SlurmUser (the operator) and root: a jail user's token
    gets nothing, and neither does a request with none; root's token is the control that the refusal
    is about the user."""
    for metric_set in METRIC_SETS:
        if who == "root":
            assert SlurmMetricsClient(rest_slurm.metrics_url, lambda: mint_token(rest_slurm.key, user="root"),
                                      retries=0).scrape(metric_set)
            continue
        with pytest.raises(SlurmAuthError, match=f"GET /metrics/{metric_set}"):
            SlurmMetricsClient(rest_slurm.metrics_url, lambda: mint_token(rest_slurm.key, user=who),
                               retries=0).scrape(metric_set)
        with pytest.raises(SlurmAuthError):
            SlurmMetricsClient(rest_slurm.metrics_url, lambda: "", retries=0).scrape(metric_set)


def test_a_slurm_that_cannot_be_read_is_down_not_empty(rest_slurm, tmp_path):
    rest_slurm.stop_rest()
    try:
        samples, _, _ = _scrape(rest_slurm)
    finally:
        rest_slurm.start_rest()
    assert [s.value for s in samples["slurm_up"]] == [0]
    assert [name for name in samples if name != "slurm_up"] == []
    # slurmrestd answers, slurmctld's HTTP server does not: down all the same.
    samples, calls, _ = _scrape(rest_slurm, metrics_url="http://127.0.0.1:9")
    assert calls == 1 and [s.value for s in samples["slurm_up"]] == [0]
    assert [name for name in samples if name != "slurm_up"] == []


def test_the_dashboard_asks_only_for_series_the_operator_serves(rest_slurm):
    samples, _, _ = _scrape(rest_slurm)
    with metrics.timed("hpc", NAME):  # a reconcile: its counters get their first series
        pass
    served = {s.name for family in samples.values() for s in family}
    served |= {s.name for family in metrics.REGISTRY.collect() for s in family.samples}
    dashboard = json.loads((ROOT / "charts" / "slurm-operator" / "files" / "grafana-dashboard.json").read_text())
    asked = {name for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"\b((?:slurm|soperator)_[a-z_]+)\b", target["expr"])}
    assert len(asked) >= 10 and asked <= served, asked - served
