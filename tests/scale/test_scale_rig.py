"""The operator at a hundred workers on the scale rig (tests/support/scale_rig.py: real apiserver,
controllers and scheduler, KWOK nodes, real slurmctld and slurmrestd). Counts only, never times:
an idle pass costs the same calls at 100 workers as at 10 and writes nothing; every pod has its IDLE
Slurm node after scale-out; a scale-in deletes no pod whose node was not drained first; a rollout
keeps at most maxUnavailable workers out of service. The figures at 1,000 are bench/scale_rig.py's."""
from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.support.scale_rig import Rig, scale_rig
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.slurm]
WORKERS = 100


def _idle_pass(rig: Rig) -> tuple[Counter, int, int]:
    """(API calls by verb and kind, REST calls, REST bytes) of a pass over an unchanged cluster."""
    time.sleep(1.1)  # slurmctld answers "unchanged" only for a list older than its last change's second
    calls, rest, received = Counter(rig.kube.calls), rig.rest.calls, rig.rest.bytes_received
    rig.reconcile()
    return Counter(rig.kube.calls) - calls, rig.rest.calls - rest, rig.rest.bytes_received - received


def _all_idle(rig: Rig, workers: int) -> bool:
    return len(rig.records) == workers and rig.slurm_states() == Counter(idle=workers)


@pytest.fixture(scope="module")
def rig():
    with scale_rig(WORKERS + 1) as rig:
        yield rig


def test_idle_pass_costs_the_same_calls_at_100_workers_as_at_10_and_writes_nothing(rig):
    rig.start(10)
    rig.converge(lambda: _all_idle(rig, 10), 300, "10 workers IDLE")
    _idle_pass(rig)
    at_10 = _idle_pass(rig)
    rig.apply(WORKERS)
    rig.converge(lambda: _all_idle(rig, WORKERS), 600, f"{WORKERS} workers IDLE")
    _idle_pass(rig)
    at_100 = _idle_pass(rig)
    assert at_100[0] == at_10[0] and not [k for k in at_100[0] if k[0] not in ("get", "list")], (at_10, at_100)
    assert at_100[1:] == at_10[1:] == (1, 0), "one REST call, answered 'unchanged' with no body"
    # Every pod accounted for: its own record, IDLE; the status counts them.
    assert set(rig.records) == {p["metadata"]["name"] for p in rig.pods()}
    status = rig.body()["status"]
    assert status["phase"] == "Ready" and status["workers"]["ready"] == WORKERS, status


def test_scale_in_of_half_deletes_only_drained_workers(rig):
    states: dict[str, str] = {}
    deleted: dict[str, str] = {}  # pod gone: its node's state in the pass before

    def done() -> bool:
        nonlocal states
        pods = {p["metadata"]["name"] for p in rig.pods()}
        # A pod gone since the last pass had its node drained by then: the operator lowers replicas
        # only in a pass after the one that drained.
        deleted.update((n, s) for n, s in states.items() if n not in pods)
        states = {line.split()[0]: line.split()[1] for line in rig.slurm("sinfo", "-h", "-N", "-o", "%N %t").splitlines()
                  if line.split()[0] in pods}
        return len(pods) == WORKERS // 2 and len(rig.records) == WORKERS // 2

    rig.apply(WORKERS // 2)
    rig.converge(done, 600, "scale-in to half")
    assert len(deleted) == WORKERS // 2 and set(deleted.values()) <= {"drain", "drng"}, deleted
    assert rig.slurm_states() == Counter(idle=WORKERS // 2)


def test_rollout_keeps_at_most_max_unavailable_out_of_service(rig):
    workers, limit = WORKERS // 2, 5
    old = rig.revision()
    rig.apply(workers, sharedMemorySize="128Mi", maxUnavailable=limit)
    out_of_service = []

    def done() -> bool:
        out_of_service.append(workers - rig.slurm_states().get("idle", 0))
        return out_of_service[-1] == 0 and len(rig.pods()) == workers and rig.revision() not in (None, old)

    rig.converge(done, 900, "rollout")
    assert max(out_of_service) <= limit and max(out_of_service) > 0, out_of_service


def test_the_operators_watched_lists_hold_what_the_apiserver_holds(rig):
    """After scale-out, scale-in and a rollout (creates, deletes, and pods replaced under their names),
    the operator's watched pods and nodes are the apiserver's, version for version."""
    def versions(objs) -> dict[str, str]:
        return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in objs}

    def same() -> bool:
        pods = rig.kube.watched.pods("rig", "")
        nodes = rig.kube.watched.nodes()
        return versions(pods) == versions(rig.reader.list("v1", "Pod", "rig", "")) and \
            versions(nodes) == versions(rig.reader.list_all("v1", "Node", []))
    until(same, 30, "the watched lists to catch up with the apiserver")
    assert rig.kube.cached["Pod"] > 0 and rig.kube.cached["Node"] > 0
