"""A running Slurm 24.11 cluster (the quick start's, with accounting) upgraded in place to 26.05 by one
change of `spec.slurmVersion`, with a job running across the upgrade and one queued behind it.

Shared by tests/kube/test_upgrade_e2e.py, which asserts on what it saw, and `bench.local_node
upgrade`, which reports it. Everything a user does goes through ssh to the login node (root in the
jail); the operator, in cluster, does the rest.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import paramiko

from tests.support.kube_report import namespace_report
from tests.support.ssh_session import Login
from tests.support.wait import until

PARTS = ("accounting", "controller", "workers", "login")
# The long job runs until this file exists in the jail: the scenario writes it once it has seen the job
# RUNNING on an old slurmd under the new slurmctld, however long slurmdbd and slurmctld took to move
# (a fixed sleep raced them on a slow machine). Its time limit keeps a failed run from leaving it behind.
RELEASE_FILE = "/root/upgrade/release"
RUNNING_JOB_LIMIT_MINUTES = 30


@dataclass
class UpgradeRun:
    seconds: float = 0.0  # slurmVersion changed -> condition SlurmUpgraded True
    moved: dict[str, float] = field(default_factory=dict)  # part -> seconds when the operator began moving it
    order: list[str] = field(default_factory=list)  # the parts in the order the operator moved them
    # (controller's releases, the workers' node versions, the running job's state), whenever a worker
    # still ran the old slurmd under the new slurmctld
    mixed: list[tuple[list[str], list[str], str]] = field(default_factory=list)
    jobs: dict[str, str] = field(default_factory=dict)  # name -> sacct State|ExitCode after the upgrade
    status: dict = field(default_factory=dict)  # status.slurmRelease at the end
    diagnosis: str = ""  # what Slurm says of the jobs, when one did not complete
    ctld_version: str = ""
    daemons_done: tuple[dict, dict] = ({}, {})  # status.slurmRelease and condition SlurmUpgraded then
    config_before_jail: str = ""  # slurm.conf once every daemon moved, the jail not yet
    jail_seconds: float = 0.0  # populateJail.overwrite set -> the jail's clients on the new release
    jail_client: str = ""  # `sinfo --version` in a login session after
    config: str = ""
    node_versions: list[str] = field(default_factory=list)

    @property
    def killed(self) -> int:
        """Jobs that ended any other way than COMPLETED 0:0."""
        return sum(state != "COMPLETED|0:0" for state in self.jobs.values())


def _cluster(kubectl, namespace: str, name: str) -> dict:
    return json.loads(kubectl("-n", namespace, "get", "slurmcluster", name, "-o", "json").stdout)


def _condition(body: dict, kind: str) -> dict:
    return next((c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


# What SlurmUpgraded's message calls each part while it moves (reconcile/upgrade.py).
_MOVING = {"slurmdbd": "accounting", "slurmctld": "controller", "the workers": "workers", "the login nodes": "login"}


def _moving(cond: dict) -> str | None:
    if cond.get("reason") != "Upgrading":
        return None
    what = cond.get("message", "").split(": ", 1)[-1]
    return next((part for name, part in _MOVING.items() if what.startswith(name + " ")), None)


def _node_versions(login: Login) -> list[str]:
    lines = login.run("scontrol -o show node").splitlines()
    return sorted(ln.split("Version=")[1].split()[0] for ln in lines if "Version=" in ln)


def _sacct(login: Login, job: str) -> str:
    return login.run(f"sacct -a -n -X -P -j {job} -o State,ExitCode || true").strip()


def _ended(login: Login, job: str) -> bool:
    """Neither waiting nor running (a job requeued and held after a failed launch waits for ever)."""
    state = login.run(f"scontrol -o show job {job} || true")
    return "JobState=" in state and state.split("JobState=")[1].split()[0] not in (
        "PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED")


def _diagnosis(login: Login, *jobs: str) -> str:
    lines = [login.run(f"scontrol -o show job {job} || true").strip() for job in jobs]
    lines.append(login.run("sacct -a -X -P -o JobID,State,ExitCode,NodeList,Reason%40 || true"))
    lines.append(login.run("sinfo -N -o '%N %t %E' || true"))
    lines.append(login.run("tail -n 20 /root/upgrade/*.out 2>&1 || true"))
    return "\n".join(lines)


def upgrade(kubectl, namespace: str, name: str, login: Login, new: str = "26.05", timeout: float = 1200) -> UpgradeRun:
    out = UpgradeRun()
    login.run("mkdir -p /root/upgrade")
    history = login.run("sbatch --parsable --wait -o /dev/null --wrap true").strip()
    until(lambda: _sacct(login, history) == "COMPLETED|0:0", 120, "the first job's record in sacct", interval=2)
    login.run(f"rm -f {RELEASE_FILE}")
    running = login.run(f"sbatch --parsable -N1 -t {RUNNING_JOB_LIMIT_MINUTES} -o /root/upgrade/running.out --wrap "
                        f"'while [ ! -e {RELEASE_FILE} ]; do sleep 1; done; echo done'").strip()
    until(lambda: "JobState=RUNNING" in login.run(f"scontrol -o show job {running}"), 120, "the long job to run")
    # Both workers: it waits for the long job's node, and runs once it is free.
    queued = login.run("sbatch --parsable -N2 -o /root/upgrade/queued.out --wrap 'srun hostname'").strip()
    assert "JobState=PENDING" in login.run(f"scontrol -o show job {queued}")

    kubectl("-n", namespace, "patch", "slurmcluster", name, "--type=merge", "-p",
            json.dumps({"spec": {"slurmVersion": new}}))
    began = time.monotonic()
    login_replaced = False
    while True:
        elapsed = time.monotonic() - began
        assert elapsed < timeout, (f"not upgraded after {timeout:.0f} s: {_cluster(kubectl, namespace, name).get('status')}"
                                   f"\n{namespace_report(kubectl, namespace, logs_of=('soperator-slurm-operator-',))}")
        body = _cluster(kubectl, namespace, name)
        releases = (body.get("status") or {}).get("slurmRelease") or {}
        cond = _condition(body, "SlurmUpgraded")
        moving = _moving(cond)
        if moving and (not out.order or out.order[-1] != moving):
            out.order.append(moving)  # the part the operator moves now, as its condition says
            out.moved[moving] = round(elapsed, 1)
        if cond.get("status") == "True" and cond.get("observedGeneration") == body["metadata"]["generation"]:
            out.seconds = round(elapsed, 1)
            break
        if not login_replaced and "login" not in out.moved:
            try:
                versions = _node_versions(login)
                old = [v for v in versions if not v.startswith(new)]
                if releases.get("controller") == [new] and old:
                    state = login.run(f"scontrol -o show job {running}").split("JobState=")[1].split()[0]
                    out.mixed.append((releases["controller"], versions, state))
                    if state == "RUNNING":
                        login.run(f"touch {RELEASE_FILE}")  # seen: its node may move now
            except AssertionError:
                pass  # slurmctld restarting: no answer this time
            except (OSError, EOFError, paramiko.SSHException):
                login_replaced = True  # the login pod went: its session with it
        time.sleep(3)

    login.reconnect()
    try:
        until(lambda: all(_ended(login, job) for job in (running, queued)), 300, "the jobs to end", interval=3)
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{_diagnosis(login, running, queued)}") from None
    out.jobs = {"before": _sacct(login, history), "running": _sacct(login, running), "queued": _sacct(login, queued)}
    if out.killed:
        out.diagnosis = _diagnosis(login, running, queued)
    out.ctld_version = login.run("scontrol show config | grep '^SLURM_VERSION'").split("=")[1].strip()
    out.node_versions = _node_versions(login)
    body = _cluster(kubectl, namespace, name)
    out.daemons_done = ((body.get("status") or {}).get("slurmRelease") or {}, _condition(body, "SlurmUpgraded"))
    out.config_before_jail = _slurm_conf(kubectl, namespace, name)

    # The jail's own clients, refilled from the new release's image on the admin's word.
    kubectl("-n", namespace, "patch", "slurmcluster", name, "--type=merge", "-p",
            json.dumps({"spec": {"populateJail": {"overwrite": True}}}))
    began = time.monotonic()
    until(lambda: _condition(_cluster(kubectl, namespace, name), "SlurmUpgraded").get("reason") == "Current", 900,
          "the jail refilled with the new release's clients", interval=3)
    out.jail_seconds = round(time.monotonic() - began, 1)
    out.jail_client = login.run("sinfo --version").strip()
    out.status = (_cluster(kubectl, namespace, name).get("status") or {}).get("slurmRelease") or {}
    out.config = _slurm_conf(kubectl, namespace, name)
    return out


def _slurm_conf(kubectl, namespace: str, name: str) -> str:
    return kubectl("-n", namespace, "get", "configmap", f"{name}-slurm-configs", "-o",
                   "jsonpath={.data.slurm\\.conf}").stdout
