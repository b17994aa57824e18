"""Slurm metrics as the operator's /metrics serves them, against the real slurmctld and slurmrestd: at
the same moment they equal sinfo's and squeue's counts, a scrape costs three REST calls, and a Slurm
that cannot be read is `slurm_up 0` with no other Slurm series. The chart's Grafana dashboard asks only
for series that exist."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from soperator.metrics import server as metrics
from soperator.render.configs import placeholder_node_name
from soperator.slurm import SlurmRestClient, mint_token
from soperator.metrics.slurm import SlurmCollector, Target, gpus
from tests.support.rest_slurm import NAME, REGISTERED
from tests.support_paths import ROOT
from tests.support.wait import until

pytestmark = pytest.mark.slurm
SINFO = {"idle": "idle", "alloc": "allocated", "mix": "mixed", "drng": "draining", "drain": "drained", "down": "down"}


def _scrape(rest_slurm) -> tuple[dict[str, list], int]:
    client = SlurmRestClient(rest_slurm.url, lambda: mint_token(rest_slurm.key), retries=0)
    cluster = rest_slurm.cluster
    collector = SlurmCollector()
    collector.track(Target("hpc", NAME, client, tuple(n.name for n in cluster.spec.node_sets),
                           frozenset(placeholder_node_name(cluster, n) for n in cluster.spec.node_sets),
                           tuple(p.name for p in cluster.spec.partitions)))
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    samples = {f.name: [s for s in f.samples] for f in text_string_to_metric_families(text)}
    return samples, client.calls


def _values(samples: list, *keys: str) -> dict:
    return {tuple(s.labels[k] for k in keys): s.value for s in samples if s.value}


def test_metrics_equal_sinfo_and_squeue_at_the_same_moment(rest_slurm):
    running = rest_slurm.run("sbatch", "--parsable", "-w", REGISTERED, "-o", "/dev/null", "--wrap", "sleep 60").strip()
    waiting = rest_slurm.run("sbatch", "--parsable", "-p", "big", "-o", "/dev/null", "--wrap", "true").strip()
    until(lambda: rest_slurm.job(running)["JobState"] == "RUNNING", 30, "the job to run")
    try:
        samples, calls = _scrape(rest_slurm)
        sinfo = rest_slurm.run("sinfo", "-h", "-N", "-o", "%N %t").split()
        squeue = rest_slurm.run("squeue", "-h", "-t", "all", "-o", "%P %T").splitlines()
        cpus = dict(line.split() for line in rest_slurm.run("sinfo", "-h", "-o", "%R %C").splitlines())
        submitted = re.search(r"Jobs submitted:\s+(\d+)", rest_slurm.run("sdiag")).group(1)
    finally:
        rest_slurm.run("scancel", running, waiting)
    assert calls == 3
    who = {"namespace": "hpc", "cluster": NAME}
    assert [s.labels for s in samples["slurm_up"]] == [who] and samples["slurm_up"][0].value == 1
    # Nodes: sinfo's states, by node set; the FUTURE placeholders are not nodes.
    assert _values(samples["slurm_nodes"], "node_set", "state") == {("cpu", SINFO[sinfo[1]]): 1}
    assert sinfo[1] == "mix" or sinfo[1] == "alloc"
    # Jobs: squeue's partition and state for every job slurmctld holds.
    want = Counter(tuple(line.lower().split()) for line in squeue)
    assert _values(samples["slurm_jobs"], "partition", "state") == dict(want)
    assert want[("big", "pending")] == 1 and want[("main", "running")] == 1
    # CPUs per partition: sinfo -o %C (allocated/idle/other/total).
    for partition, text in cpus.items():
        allocated, idle, other, total = map(int, text.split("/"))
        got = {s.labels["state"]: s.value for s in samples["slurm_partition_cpus"] if s.labels["partition"] == partition}
        assert got == {"allocated": allocated, "idle": idle, "other": other, "total": total}, partition
    # sdiag at the same moment (nothing submitted between).
    events = {s.labels["event"]: s.value for s in samples["slurm_scheduler_jobs"]}
    assert events["submitted"] == int(submitted)


def test_a_slurm_that_cannot_be_read_is_down_not_empty(rest_slurm):
    rest_slurm.stop_rest()
    try:
        samples, _ = _scrape(rest_slurm)
    finally:
        rest_slurm.start_rest()
    assert [s.value for s in samples["slurm_up"]] == [0]
    assert [name for name in samples if name.startswith("slurm_") and name != "slurm_up"] == []


def test_gpus_are_counted_from_gres_strings():
    assert gpus("gpu:h100:8(S:0-1),shard:8") == 8
    assert gpus("gpu:2,gpu:a100:1(S:0)") == 3
    assert gpus("shard:8") == gpus("") == gpus("gpu:h100:0(IDX:N/A)") == 0


def test_the_dashboard_asks_only_for_series_the_operator_serves(rest_slurm):
    samples, _ = _scrape(rest_slurm)
    with metrics.timed("hpc", NAME):  # a reconcile: its counters get their first series
        pass
    served = {s.name for family in samples.values() for s in family}
    served |= {s.name for family in metrics.REGISTRY.collect() for s in family.samples}
    dashboard = json.loads((ROOT / "charts" / "slurm-operator" / "files" / "grafana-dashboard.json").read_text())
    asked = {name for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"\b((?:slurm|soperator)_[a-z_]+)\b", target["expr"])}
    assert len(asked) >= 10 and asked <= served, asked - served
