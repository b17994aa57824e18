"""A job waiting for an autoscaling node set gets its workers at once, not at the next resync.

Every few seconds each cluster that autoscaled at its last pass is asked for its nodes (one call,
answered "not modified" while nothing changed: slurmrestd's update_time). A record Slurm powers up
that was not powering up at the last look means a job waits for a worker: the cluster's pass runs
now. The pass plans as always (autoscale.py); this only chooses when it runs.
"""
from __future__ import annotations

from typing import Callable

from soperator.reconcile.autoscale import powering_up
from soperator.slurm import SlurmError, SlurmRestClient

Where = tuple[str, str]  # (namespace, name)


def poll_demand(elastic: list[tuple[Where, SlurmRestClient]], seen: dict[Where, frozenset[str]],
                run_pass: Callable[[str, str], None]) -> list[Where]:
    """Run the pass of each elastic cluster (SlurmClients.elastic) with a newly powering-up record;
    `seen`: each one's records powering up at the last look, kept by the caller between calls. The
    clusters passed, in order."""
    for gone in set(seen) - {where for where, _ in elastic}:
        del seen[gone]
    passed = []
    for where, client in elastic:
        try:
            powering = powering_up(client.list_nodes())
        except SlurmError:
            continue  # unreachable for now: the resync's pass says why
        new = powering - seen.get(where, frozenset())
        seen[where] = powering
        if new:
            run_pass(*where)
            passed.append(where)
    return passed
