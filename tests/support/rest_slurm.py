"""One real slurmctld + slurmrestd (and a slurmd) of the node image for the REST channel tests,
reached from here as the operator reaches it: HTTP with a JWT. The fixture `rest_slurm` is registered
for every test by tests/conftest.py (pytest_plugins)."""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox
from tests.support.thin_jail import make_thin_jail
from tests.support.wait import until

# The cluster the sandbox runs: two node sets; one worker of `cpu` runs a slurmd, the rest exist as
# pods only (tests/kube) or as FUTURE records.
SPEC = {"nodeSets": [{"name": "cpu", "replicas": 2, "features": ["ib"]}, {"name": "big", "replicas": 1}],
        "partitions": [{"name": "main", "default": True}, {"name": "big", "nodeSets": ["big"]}],
        "slurmConfig": {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                        "extra": {"SchedulerParameters": "batch_sched_delay=0"}}}
NAME = "rest"
# The highest ordinal of its node set: the one a scale-in of `cpu` takes away.
REGISTERED = f"{NAME}-cpu-1"


class RestSlurm:
    def __init__(self, box: SlurmSandbox, forwarders: tuple[RestForwarder, RestForwarder], key: bytes, cluster):
        self.box, self.key, self.cluster = box, key, cluster
        self.forwarder, self.ctld_forwarder = forwarders

    @property
    def url(self) -> str:
        """slurmrestd's."""
        return self.forwarder.url

    @property
    def metrics_url(self) -> str:
        """slurmctld's own HTTP server's."""
        return self.ctld_forwarder.url

    def start_rest(self) -> None:
        """slurmrestd again, as the sandbox starts it (after a test stopped it)."""
        socket = SlurmSandbox.rest_socket(self.box.work)
        self.run("sh", "-c", f"rm -f {socket}; runuser -u nobody -- env SLURM_JWT=daemon slurmrestd -a rest_auth/jwt "
                             f"-s openapi/slurmctld unix:{socket} >>{self.box.work}/slurmrestd.log 2>&1 </dev/null &")
        until(socket.exists, 30, "slurmrestd's socket")

    def stop_rest(self) -> None:
        self.run("pkill", "-x", "slurmrestd")
        until(lambda: "slurmrestd" not in self.run("ps", "-eo", "comm"), 30, "slurmrestd to exit")

    def resume(self, node: str) -> None:
        """RESUME (refused, and nothing to do, if the node is neither drained nor down), then wait for
        the registration Slurm asks of a resumed node: until it lands, a DOWN that follows is undone
        by it (ReturnToService=2), and sinfo marks the node not responding."""
        self.box.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
        until(lambda: "*" not in self.run("sinfo", "-h", "-N", "-n", node, "-o", "%t"), 30,
              f"{node} to register again after its resume")

    def job(self, job_id: str) -> dict[str, str]:
        text = self.run("scontrol", "-o", "show", "job", job_id)
        return dict(f.split("=", 1) for f in text.split() if "=" in f)

    def run(self, *argv: str) -> str:
        proc = self.box.run(*argv)
        assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
        return proc.stdout


@pytest.fixture(scope="module")
def rest_slurm(tmp_path_factory):
    cluster = make_cluster(name=NAME, **SPEC)
    key = generate_jwt_key()
    work = tmp_path_factory.mktemp("rest-slurm")
    box = SlurmSandbox(work, slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                       names=[REGISTERED], slurmd=REGISTERED, node_conf=worker_node_conf(cluster.spec.node_sets[0]),
                       jwt_key=key, rest=True, jail=make_thin_jail(work / "jail"))
    with reached(box, key, cluster) as slurm:
        yield slurm


@contextlib.contextmanager
def reached(box: SlurmSandbox, key: bytes, cluster) -> Iterator[RestSlurm]:
    """A sandbox started with rest=True, reached from here; closed (the box too) at the end."""
    forwarders = []
    try:
        assert box.status["ready"], (box.status, box.log("slurmctld.log"), box.log("slurmrestd.log"))
        forwarders = [RestForwarder(str(SlurmSandbox.rest_socket(box.work))),
                      RestForwarder(str(SlurmSandbox.ctld_socket(box.work)))]
        yield RestSlurm(box, tuple(forwarders), key, cluster)
    finally:
        for forwarder in forwarders:
            forwarder.close()
        box.close()
