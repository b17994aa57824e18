"""Three registered slurmds under one real slurmctld (the node image's), as three worker pods on two
machines: the cluster of tests/support/rest_slurm.py (node sets cpu and big) with a topology, its
files rendered by soperator. rest-cpu-0 runs as the sandbox's own slurmd; rest-cpu-1 and rest-big-0
each in a network namespace of its own (slurm_sandbox.netns_slurmd). Shared by
tests/kube/test_topology.py and bench/topology.py."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.conftest import make_cluster
from tests.support.rest_slurm import NAME, SPEC, RestSlurm, reached
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail
from tests.support.wait import until

CPU0, CPU1, BIG0 = f"{NAME}-cpu-0", f"{NAME}-cpu-1", f"{NAME}-big-0"


@contextlib.contextmanager
def three_nodes(work: Path, topology: dict, blocks: tuple[str, ...] = ()) -> Iterator[RestSlurm]:
    """The sandbox's slurmctld on the cluster's files, with one slurmd per worker pod."""
    cluster = make_cluster(name=NAME, topology=topology, **SPEC)
    key = generate_jwt_key()
    cpu, big = (worker_node_conf(n) for n in cluster.spec.node_sets)
    box = SlurmSandbox(work, slurm_files(cluster, blocks=blocks), controller_host(cluster), generate_munge_key(),
                       names=[CPU0], slurmd=CPU0, node_conf=cpu, jwt_key=key, rest=True, jail=make_thin_jail(work / "jail"))
    with reached(box, key, cluster) as slurm:
        box.start_netns_slurmd(CPU1, 1, cpu)
        box.start_netns_slurmd(BIG0, 2, big)
        until(lambda: dict(line.split() for line in slurm.run("sinfo", "-h", "-N", "-o", "%N %t").splitlines())
              == {CPU0: "idle", CPU1: "idle", BIG0: "idle"}, 60, "three slurmds registered idle")
        yield slurm
