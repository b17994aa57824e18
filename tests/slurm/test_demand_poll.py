"""The demand poll (reconcile/demand.py) against the real slurmctld and slurmrestd (26.05) with an
autoscaling node set's powered-down records: a job that needs workers makes it run the cluster's pass
at the next look, once per newly powering-up record."""
from __future__ import annotations

import pytest

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.reconcile.demand import poll_demand
from soperator.render.configs import controller_host, slurm_files
from soperator.slurm import SlurmRestClient, mint_token
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox
from tests.support.wait import until

pytestmark = pytest.mark.slurm
SLURM = {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
         "extra": {"SchedulerParameters": "batch_sched_delay=0"}}
WHERE = ("hpc", "el")


def test_a_job_for_powered_down_records_runs_the_pass_at_the_next_look_and_only_then(tmp_path):
    cluster = make_cluster(name="el", nodeSets=[{"name": "cpu", "autoscale": {"max": 3}}], slurmConfig=SLURM)
    key = generate_jwt_key()
    with SlurmSandbox(tmp_path / "box", slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                      cloud=True, jwt_key=key, rest=True) as box:
        assert box.status["ready"], (box.status, box.log("slurmctld.log"))
        forwarder = RestForwarder(str(SlurmSandbox.rest_socket(tmp_path / "box")))
        try:
            client = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0)
            elastic, seen, passes = [(WHERE, client)], {}, []

            def look() -> list:
                return poll_demand(elastic, seen, lambda ns, name: passes.append((ns, name)))

            assert look() == [] and passes == []  # every record powered down, no job
            job = box.run("sbatch", "--parsable", "-N2", "-o", "/dev/null", "--wrap", "true").stdout.strip()
            until(lambda: look(), 30, "a look that sees the records powering up")
            assert passes == [WHERE] and seen[WHERE] == {"el-cpu-0", "el-cpu-1"}
            assert look() == [] and passes == [WHERE]  # the same records still powering up: no second pass
            box.run("scontrol", "update", "NodeName=el-cpu-2", "State=POWER_UP")
            until(lambda: look(), 30, "the third record powering up")
            assert passes == [WHERE, WHERE]
            box.run("scancel", job)
            assert poll_demand([], seen, passes.append) == [] and seen == {}  # no longer elastic: forgotten
        finally:
            forwarder.close()
