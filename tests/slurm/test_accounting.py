"""Accounting on real daemons: MariaDB (the database image, prepared by its entrypoint's helpers),
slurmdbd with the rendered slurmdbd.conf, slurmctld and a slurmd. Jobs appear in sacct with state
and exit code; a slurmdbd restart and a MariaDB restart lose no record; with the database down jobs
still run, and their records arrive once it is back (slurmctld queues them)."""
from __future__ import annotations

import secrets

import pytest

from soperator.keys import generate_munge_key
from soperator.render.configs import (Storage, controller_host, slurm_files, slurmdbd_address, slurmdbd_conf,
                                      worker_node_conf)
from tests.conftest import make_cluster
from tests.support.slurm import SlurmSandbox, node_image
from tests.support.thin_jail import make_thin_jail
from tests.support.wait import until

pytestmark = pytest.mark.slurm
NAME = "acct"
NODE = f"{NAME}-cpu-0"


@pytest.fixture(scope="module")
def accounted(tmp_path_factory):
    password = secrets.token_hex(16)
    cluster = make_cluster(name=NAME, nodeSets=[{"name": "cpu", "replicas": 1}], accounting={"enabled": True},
                           slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                                        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    host = controller_host(cluster)
    files = slurm_files(cluster)
    # slurmdbd runs in the same box here: DbdHost is the box's name; slurmctld reaches it by the
    # address the rendered slurm.conf gives (mapped to the box in its /etc/hosts).
    files["slurmdbd.conf"] = slurmdbd_conf(cluster, host, Storage("127.0.0.1", 3306, "slurm", password))
    work = tmp_path_factory.mktemp("accounting")
    box = SlurmSandbox(work, files, host, generate_munge_key(), names=[NODE, slurmdbd_address(cluster)], slurmd=NODE,
                       node_conf=worker_node_conf(cluster.spec.node_sets[0]), jail=make_thin_jail(work / "jail"),
                       accounting={"database": "slurm_acct_db", "user": "slurm", "password": password},
                       image=node_image("database"))
    try:
        assert box.status["ready"], (box.status, box.log("mariadbd.log"), box.log("slurmdbd.log"),
                                     box.log("slurmctld.log"))
        yield box
    finally:
        box.close()


def _run(box, *argv: str) -> str:
    proc = box.run(*argv)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
    return proc.stdout


def _accounted(box, job: str) -> str:
    """sacct's State|ExitCode of the job's allocation; '' while slurmdbd has no record or cannot reach
    its database (sacct then fails: that is the answer "not there yet", asserted on at the end)."""
    proc = box.run("sacct", "-a", "-n", "-X", "-P", "-j", job, "-o", "State,ExitCode")
    lines = proc.stdout.split() if proc.returncode == 0 else []
    return lines[0] if lines else ""


def _job(box, command: str) -> str:
    job = _run(box, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", command).strip()
    until(lambda: "JobState=COMPLETED" in _run(box, "scontrol", "-o", "show", "job", job), 60, f"job {job}")
    return job


def _running(box, name: str) -> bool:
    """A live process of that name (the sandbox reaps its first daemons only when it ends: a killed
    one stays a zombie till then)."""
    return any(line.split()[1:] == [name] for line in _run(box, "ps", "-eo", "stat=,comm=").splitlines()
               if not line.startswith("Z"))


def _stop(box, name: str) -> None:
    _run(box, "pkill", "-x", name)
    until(lambda: not _running(box, name), 60, f"{name} to exit")


def _restart(box, name: str, argv: str, ready: str) -> None:
    _stop(box, name)
    _run(box, "sh", "-c", f"{argv} >>{box.work}/{name}.log 2>&1 </dev/null &")
    until(lambda: ready in _run(box, "ss", "-ltn"), 60, f"{name} back")


def test_jobs_are_accounted_and_survive_restarts_and_a_database_outage(accounted):
    box = accounted
    first = _job(box, "true")
    failed = box.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "exit 3").stdout.strip()
    until(lambda: _accounted(box, first) == "COMPLETED|0:0", 60, "the first job's record")
    until(lambda: _accounted(box, failed) == "FAILED|3:0", 60, "the failed job's record")
    assert NAME in _run(box, "sacctmgr", "-n", "-P", "show", "cluster", "format=cluster")  # registered itself

    # slurmdbd restarted: every record is still there.
    _restart(box, "slurmdbd", "slurmdbd -D", ":6819 ")
    assert _accounted(box, first) == "COMPLETED|0:0"

    # MariaDB down: a job still runs; its record arrives once the database is back.
    _stop(box, "mariadbd")
    during = _job(box, "echo during the outage")
    data = f"{box.work}/mysql"
    argv = " ".join(f"'{a}'" for a in ["mariadbd", "--user=mysql", f"--datadir={data}", "--socket=/run/mysqld/mysqld.sock",
                                       "--port=3306", "--bind-address=127.0.0.1", "--skip-name-resolve"])
    assert _accounted(box, during) == ""  # nothing to read it from meanwhile
    _run(box, "sh", "-c", f"{argv} >>{box.work}/mariadbd.log 2>&1 </dev/null &")
    until(lambda: ":3306 " in _run(box, "ss", "-ltn"), 60, "mariadbd back")
    until(lambda: _accounted(box, during) == "COMPLETED|0:0", 180, "the record made during the outage")
    assert _accounted(box, first) == "COMPLETED|0:0" and _accounted(box, failed) == "FAILED|3:0"
