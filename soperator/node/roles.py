"""What each node container does before its daemon starts, and the daemon itself."""
from __future__ import annotations

import os
import shutil
import subprocess

from .mounts import LOGIN, WORKER, bind_into_jail, use_jail_accounts
from .supervise import Supervisor, log, wait_for_path

# Kept in step with soperator/render/paths.py (this package cannot import the operator).
JAIL = os.environ.get("SOPERATOR_JAIL", "/mnt/jail")
MUNGE_SECRET = "/etc/soperator/munge/munge.key"
MUNGE_KEY = "/etc/munge/munge.key"
MUNGE_SOCKET = "/run/munge/munge.socket.2"
SLURMD_LOG = "/var/log/slurm/slurmd.log"
SSHD_CONFIG = "/etc/ssh/soperator/sshd_config"
POPULATED = ".soperator/populated"


class NodeError(RuntimeError):
    pass


def install_munge_key() -> None:
    """The key comes from the cluster's Secret; Debian's package bakes its own into every image."""
    if not os.path.exists(MUNGE_SECRET):
        raise NodeError(f"munge key Secret not mounted at {MUNGE_SECRET}")
    os.makedirs(os.path.dirname(MUNGE_KEY), exist_ok=True)
    shutil.copyfile(MUNGE_SECRET, MUNGE_KEY)
    os.chmod(MUNGE_KEY, 0o400)
    shutil.chown(MUNGE_KEY, "munge", "munge")
    for d in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
        os.makedirs(d, exist_ok=True)
        shutil.chown(d, "munge", "munge")


def start_munged(sup: Supervisor) -> None:
    install_munge_key()
    proc = sup.start("munged", ["runuser", "-u", "munge", "--", "munged", "-F", "--log-file=/dev/stderr"])
    if not wait_for_path(MUNGE_SOCKET, 30, proc):
        raise NodeError("munged did not create its socket")


def require_jail() -> None:
    """Refuse to start a jailed node on an empty or half-filled jail volume."""
    if not os.path.exists(os.path.join(JAIL, POPULATED)):
        raise NodeError(f"the jail at {JAIL} is not populated ({POPULATED} missing): has populate-jail run?")


def controller(sup: Supervisor) -> None:
    require_jail()
    # slurmctld looks up every job user's groups for the job credential.
    log(f"accounts from the jail: {', '.join(use_jail_accounts(JAIL))}")
    os.makedirs("/var/spool/slurmctld", exist_ok=True)
    shutil.chown("/var/spool/slurmctld", "slurm", "slurm")
    start_munged(sup)
    sup.start("slurmctld", ["slurmctld", "-D", "-f", "/etc/slurm/slurm.conf"])


def worker(sup: Supervisor) -> None:
    require_jail()
    os.makedirs("/var/spool/slurmd", exist_ok=True)
    os.makedirs(os.path.dirname(SLURMD_LOG), exist_ok=True)
    # Job users are the jail's users: slurmstepd resolves them before it enters the jail.
    log(f"accounts from the jail: {', '.join(use_jail_accounts(JAIL))}")
    start_munged(sup)
    log(f"bound into the jail: {', '.join(bind_into_jail(JAIL, WORKER))}")
    open(SLURMD_LOG, "a").close()
    sup.start("slurmd-log", ["tail", "-n", "+1", "-F", SLURMD_LOG])
    sup.start("slurmd", ["slurmd", "-D", "-f", "/etc/slurm/slurm.conf"], stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL)


def login(sup: Supervisor) -> None:
    require_jail()
    log(f"accounts from the jail: {', '.join(use_jail_accounts(JAIL))}")
    start_munged(sup)
    log(f"bound into the jail: {', '.join(bind_into_jail(JAIL, LOGIN))}")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    sup.start("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", SSHD_CONFIG])


ROLES = {"controller": controller, "worker": worker, "login": login}
