"""Every login user is in accounting without a manual sacctmgr.

While slurm.conf sends job records to slurmdbd, the controller looks at the jail's accounts (and the
directory's, spec.identity) every 10 s (slurm.conf enforces associations: until then a new user's
jobs are refused). A user (UID_MIN to UID_MAX) that slurmdbd does not know yet gets an association
in the default account, made if missing. A user slurmdbd already knows is left alone, whatever
account an admin moved it to: this only ever adds.
"""
from __future__ import annotations

import pwd
import re
import subprocess

from .directory_keys import local_names
from .supervise import log

DEFAULT_ACCOUNT = "users"
# Debian's login.defs: regular users are UID_MIN..UID_MAX; above, the Debian-static daemon ids
# (slurm and munge have fixed ones there in our images) and nobody.
UID_MIN, UID_MAX = 1000, 60000
ACCOUNTING_LINE = re.compile(r"^\s*AccountingStorageType\s*=\s*accounting_storage/slurmdbd\s*$", re.M | re.I)


def sacctmgr(*args: str) -> subprocess.CompletedProcess:
    """-i: no confirmation prompt; root is a slurmdbd admin (munge, local socket). A slurmdbd that
    does not answer in time is a failed call (returncode -1), for the caller to try again later."""
    argv = ["sacctmgr", "-i", "-n", "-P", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, -1, "", "sacctmgr timed out")


def login_users() -> list[str]:
    """The jail's regular users (its /etc/passwd, UID_MIN..UID_MAX) and, with spec.identity, every
    user the directory lists through SSSD (any id from UID_MIN: directories hand out large ones)."""
    local = local_names()
    return sorted({p.pw_name for p in pwd.getpwall() if UID_MIN <= p.pw_uid <= UID_MAX
                   or (p.pw_uid >= UID_MIN and p.pw_name not in local)})


def _names(proc: subprocess.CompletedProcess) -> set[str] | None:
    return {line.split("|")[0] for line in proc.stdout.splitlines() if line} if proc.returncode == 0 else None


class AssociationSync:
    """One look, for the supervisor's loop (sacctmgr is a child it must reap)."""

    def __init__(self, slurm_conf: str):
        self.slurm_conf = slurm_conf
        self.known: set[str] = set()

    def _accounting_on(self) -> bool:
        try:
            with open(self.slurm_conf) as fh:
                return bool(ACCOUNTING_LINE.search(fh.read()))
        except OSError:
            return False

    def __call__(self) -> None:
        if not self._accounting_on():
            return
        wanted = [u for u in login_users() if u not in self.known]
        if not wanted:
            return
        users = _names(sacctmgr("list", "users", "format=user"))
        accounts = _names(sacctmgr("list", "accounts", "format=account"))
        if users is None or accounts is None:  # slurmdbd not answering yet: the next look tries again
            return
        self.known |= users
        missing = [u for u in wanted if u not in users]
        if not missing:
            return
        if DEFAULT_ACCOUNT not in accounts:
            made = sacctmgr("add", "account", DEFAULT_ACCOUNT, "description=login users",
                            "organization=default")
            if made.returncode != 0:
                log(f"sacctmgr add account {DEFAULT_ACCOUNT}: {made.stderr.strip() or made.stdout.strip()}")
                return
        added = sacctmgr("add", "user", f"name={','.join(missing)}", f"account={DEFAULT_ACCOUNT}",
                         f"defaultaccount={DEFAULT_ACCOUNT}")
        if added.returncode != 0:
            log(f"sacctmgr add user {','.join(missing)}: {added.stderr.strip() or added.stdout.strip()}")
            return
        self.known |= set(missing)
        log(f"accounting: {', '.join(missing)} added to account {DEFAULT_ACCOUNT}")
