"""One real slurmctld + slurmrestd (and a slurmd) of the node image for the REST channel tests,
reached from here as the operator reaches it: HTTP with a JWT. The fixture `rest_slurm` is registered
for every test by tests/conftest.py (pytest_plugins)."""
from __future__ import annotations

import pytest

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox

# The cluster the sandbox runs: two node sets; one worker of `cpu` runs a slurmd, the rest exist as
# pods only (tests/kube) or as FUTURE records.
SPEC = {"nodeSets": [{"name": "cpu", "replicas": 2, "features": ["ib"]}, {"name": "big", "replicas": 1}],
        "partitions": [{"name": "main", "default": True}, {"name": "big", "nodeSets": ["big"]}],
        "slurmConfig": {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none"}}
NAME = "rest"
REGISTERED = f"{NAME}-cpu-0"


class RestSlurm:
    def __init__(self, box: SlurmSandbox, forwarder: RestForwarder, key: bytes, cluster):
        self.box, self.forwarder, self.key, self.cluster = box, forwarder, key, cluster

    @property
    def url(self) -> str:
        return self.forwarder.url

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
                       jwt_key=key, rest=True)
    forwarder = None
    try:
        assert box.status["ready"], (box.status, box.log("slurmctld.log"), box.log("slurmrestd.log"))
        forwarder = RestForwarder(str(SlurmSandbox.rest_socket(work)))
        yield RestSlurm(box, forwarder, key, cluster)
    finally:
        if forwarder:
            forwarder.close()
        box.close()
