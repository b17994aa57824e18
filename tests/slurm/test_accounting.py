"""Accounting on real daemons: MariaDB (the database image, prepared by its entrypoint's helpers),
slurmdbd with the rendered slurmdbd.conf, slurmctld and a slurmd. Jobs appear in sacct with state
and exit code; a slurmdbd restart and a MariaDB restart lose no record; with the database down jobs
still run, and their records arrive once it is back (slurmctld queues them). Fair share: of two
accounts, the one that used the node gets the lower priority (sprio). A login user is put in the
default account by the controller's sync, with no sacctmgr by hand. A wrong password and an
unreachable database are named from what a real slurmdbd logs. A slurmctld whose ClusterID predates
slurmdbd's record of it starts again once the controller has taken slurmdbd's ID."""
from __future__ import annotations

import re

import pytest

from soperator.reconcile.accounting import FAILED_TRIES, diagnose
from tests.support.accounting import accounted_box
from tests.support.wait import until

pytestmark = pytest.mark.slurm
NAME = "acct"
USER, USER_ID = "alice", 2001


@pytest.fixture(scope="module")
def accounted(tmp_path_factory):
    # Fair share is recomputed every PriorityCalcPeriod: its least, 1 minute, rather than 5, for sprio.
    extra = {"SchedulerParameters": "batch_sched_delay=0", "PriorityCalcPeriod": "1"}
    with accounted_box(tmp_path_factory.mktemp("accounting"), NAME, extra, jail_users={USER: USER_ID}) as box:
        yield box


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


def _priorities(box, jobs: dict[str, str]) -> dict[str, tuple[int, int]]:
    """{account: (priority, fair-share part)} of pending jobs {account: job id}, from sprio."""
    out = _run(box, "sprio", "-h", "-o", "%i %Y %F")
    by_job = {line.split()[0]: (int(line.split()[1]), int(line.split()[2])) for line in out.splitlines()}
    return {account: by_job[job] for account, job in jobs.items() if job in by_job}


def test_the_account_that_used_more_gets_the_lower_priority(accounted):
    """Fair share from slurmdbd's usage: `heavy` runs a job, `light` none; then a job of each waits
    behind one that holds the node, and sprio ranks light's first. (The holder's account is a third,
    root's own, so that its usage counts for neither.)"""
    box = accounted
    _run(box, "sacctmgr", "-i", "add", "account", "heavy,light")
    _run(box, "sacctmgr", "-i", "add", "user", "root", "account=heavy,light")
    # slurmdbd pushes new associations to slurmctld a moment later; a job submitted before would be
    # charged to root's default account instead (seen: heavy's usage stayed 0).
    until(lambda: all(f"Account={a} UserName=root" in _run(box, "scontrol", "show", "assoc_mgr", "flags=assoc",
                                                           "users=root", f"accounts={a}") for a in ("heavy", "light")),
          60, "slurmctld to know root's new associations")
    used = _run(box, "sbatch", "--parsable", "-A", "heavy", "-o", "/dev/null", "--wrap", "sleep 15").strip()
    until(lambda: "JobState=COMPLETED" in _run(box, "scontrol", "-o", "show", "job", used), 90, "heavy's job")
    holder = _run(box, "sbatch", "--parsable", "--exclusive", "-A", "root", "-o", "/dev/null",
                  "--wrap", "sleep 600").strip()
    until(lambda: "JobState=RUNNING" in _run(box, "scontrol", "-o", "show", "job", holder), 60, "the holder to run")
    waiting = {account: _run(box, "sbatch", "--parsable", "-A", account, "-o", "/dev/null", "--wrap", "true").strip()
               for account in ("heavy", "light")}
    try:
        # Usage reaches the fair-share factors at the next PriorityCalcPeriod pass (1 minute here).
        try:
            ranked = until(lambda: (p := _priorities(box, waiting)).get("heavy", (0, 0))[1]
                           < p.get("light", (0, 0))[1] and p, 150, "heavy's fair-share part to fall below light's")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_run(box, 'squeue', '-o', '%i %a %T %r %Q')}\n{_run(box, 'sprio', '-l')}\n"
                                 f"{_run(box, 'sshare', '-a')}\n{box.run('sacct', '-a', '-X', '-o', 'JobID,Account,State,Elapsed,AllocCPUS')}"
                                 f"\n{_run(box, 'scontrol', 'show', 'assoc_mgr', 'flags=assoc', 'users=root')}") from None
        assert ranked["heavy"][0] < ranked["light"][0], ranked  # and so the whole priority
        usage = dict(line.split("|") for line in _run(box, "sshare", "-h", "-P", "-A", "heavy,light",
                                                      "-o", "Account,RawUsage").splitlines()
                     if line and not line.startswith("|"))
        assert int(usage["heavy"]) > 0 and int(usage["light"]) == 0, usage
    finally:
        _run(box, "scancel", holder, *waiting.values())


SYNC = ("import sys; sys.path.insert(0, '/opt/soperator'); "
        "from soperator_node.associations import AssociationSync; AssociationSync('/etc/slurm/slurm.conf')()")


def _accounts_of(box, user: str) -> list[str]:
    return sorted(_run(box, "sacctmgr", "-n", "-P", "list", "associations", f"user={user}", "format=account").split())


def test_a_login_user_is_accounted_with_no_sacctmgr_by_hand(accounted):
    """The controller's sync (the node package's code, run in the box as the controller's loop runs
    it) puts a jail user slurmdbd does not know in the default account; a user an admin placed
    elsewhere is left there. The new user's first job is recorded under that account."""
    box = accounted
    _run(box, "useradd", "-u", str(USER_ID), "-d", "/tmp", "-M", USER)
    _run(box, "useradd", "-u", str(USER_ID + 1), "-d", "/tmp", "-M", "bob")
    _run(box, "sacctmgr", "-i", "add", "account", "lab")
    _run(box, "sacctmgr", "-i", "add", "user", "bob", "account=lab")
    _run(box, "python3", "-c", SYNC)
    assert _accounts_of(box, USER) == ["users"]
    assert _accounts_of(box, "bob") == ["lab"]  # an admin's choice is kept
    job = _run(box, "runuser", "-u", USER, "--", "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip()
    until(lambda: box.run("sacct", "-a", "-n", "-X", "-P", "-j", job, "-o", "Account,User,State").stdout.strip()
          == f"users|{USER}|COMPLETED", 90, "the user's job recorded under the default account")


@pytest.mark.parametrize("change, reason, words", [
    ("s/^StoragePass=.*/StoragePass=not-the-password/", "DatabaseAccessDenied", "Access denied"),
    ("s/^StoragePort=.*/StoragePort=3399/", "DatabaseUnreachable", "Can't connect"),
], ids=["wrong-password", "unreachable"])
def test_why_slurmdbd_cannot_start_is_named(accounted, change, reason, words):
    """A second slurmdbd (its own port) given a bad slurmdbd.conf: what it logs while it retries is
    what the operator reads from the pod's log for the AccountingReady condition."""
    box = accounted
    conf = "/tmp/bad-slurmdbd"
    _run(box, "sh", "-c", f"rm -rf {conf} && cp -a /etc/slurm {conf} && sed -i -e '{change}' "
                          f"-e 's/^DbdPort=.*/DbdPort=6829/' -e 's|^PidFile=.*|PidFile={conf}/pid|' "
                          f"{conf}/slurmdbd.conf && chown slurm {conf}/slurmdbd.conf && chmod 600 {conf}/slurmdbd.conf")
    # Watched until it has failed as often as the operator's diagnosis wants (at most 25 s), then asked
    # whether it still runs (retrying, never listening), then stopped.
    failed = f"[ $(grep -c 'mysql_real_connect failed' {conf}/err) -ge {FAILED_TRIES} ]"
    watch = (f"slurmdbd -D 2> {conf}/err & pid=$!; for i in $(seq 250); do {failed} && break; sleep 0.1; done; "
             f"kill -0 $pid && echo running; kill $pid; wait $pid; cat {conf}/err >&2")
    proc = box.run("sh", "-c", watch, env={"SLURM_CONF": f"{conf}/slurm.conf"}, timeout=45)
    assert proc.stdout.strip() == "running", (proc.stdout, proc.stderr[-2000:])
    found = diagnose(proc.stderr)
    assert found and found[0] == reason and words in found[1], (found, proc.stderr[-2000:])


TAKE = ("import sys; sys.path.insert(0, '/opt/soperator'); "
        "from soperator_node.cluster_id import take_cluster_id_from_database as take; "
        "print(take('/etc/slurm/slurm.conf', '/var/spool/slurmctld'))")
SLURMCTLD = "slurmctld -D -i -f /etc/slurm/slurm.conf"


def test_a_cluster_that_gained_accounting_late_starts_again(accounted):
    """As on the real node when accounting is switched on in a running cluster: slurmctld's kept
    ClusterID is not the one slurmdbd gave the cluster. slurmctld then refuses to start; once the
    controller's start-up has dropped the kept ID, it starts with slurmdbd's and runs jobs."""
    box = accounted
    path = "/var/spool/slurmctld/clustername"
    name, _, ours = _run(box, "cat", path).strip().partition("|")
    assert name == NAME
    _stop(box, "slurmctld")
    _run(box, "sh", "-c", f"printf '%s' '{NAME}|{int(ours) % 4000 + 1}' > {path}")  # a first start's own ID
    refused = box.run("timeout", "30", *SLURMCTLD.split(), timeout=60)
    assert "CLUSTER ID MISMATCH" in refused.stderr, refused.stderr[-2000:]
    database_id = re.findall(r'the DBD thinks it should be "(\d+)"', refused.stderr)[0]
    assert _run(box, "python3", "-c", TAKE).strip() == "True"
    _run(box, "sh", "-c", f"{SLURMCTLD} >>{box.work}/slurmctld.log 2>&1 </dev/null &")
    until(lambda: ":6817 " in _run(box, "ss", "-ltn"), 60, "slurmctld back")
    # slurmdbd's, written back by slurmctld once it has registered (it may listen a moment before)
    until(lambda: box.run("cat", path).stdout == f"{NAME}|{database_id}", 60, "slurmdbd's ID in clustername")
    job = _job(box, "true")  # it schedules again, and its records still reach slurmdbd
    until(lambda: _accounted(box, job) == "COMPLETED|0:0", 60, "the job's record")
