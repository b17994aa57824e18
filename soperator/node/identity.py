"""spec.identity on a node: SSSD beside the Slurm daemons, serving the node and its jail.

sssd.conf comes from the operator without credentials; the bind DN and password are added here from
the admin's Secret, so they live only in that Secret and in this container's root-only file. SSSD
runs as root in the foreground (its clients check that the PAM socket is root's) and not dumpable
(sssd.conf's core_dumpable), so root in the jail cannot follow /proc/<pid>/root into this container.
Its public sockets and memory cache are bound into the jail read-only, its private ones hidden, so
job steps and login sessions resolve the same users and change nothing of SSSD's. SSSD starts
whether or not the directory answers: offline, it serves the users in its cache.
"""
from __future__ import annotations

import os
import stat
import subprocess

from . import private_file
from .layout import BIND_DN_FILE, BIND_PASSWORD_FILE, PATHS
from .mounts import bind, mount_points, run_mount
from .supervise import Supervisor, log, wait_for_path

# sssd's own directories in its state volume (an emptyDir, empty at a pod's first start), with the
# modes its package gives them.
STATE_DIRS = (("", 0o755), ("db", 0o700), ("mc", 0o775), ("pipes", 0o755), ("pipes/private", 0o700),
              ("pubconf", 0o755), ("gpo_cache", 0o755), ("secrets", 0o700), ("deskprofile", 0o711))
# The controller lists every directory user for its accounting sync (associations.py), as often as
# sssd.conf says (ldap_enumeration_refresh_timeout); other nodes only look users up.
ENUMERATE = "enumerate = true\n"
SOCKET_WAIT = 60.0
SSSD_ARGV = ["sssd", "-i", "--logger=stderr"]
# How often a node looks for a rotated bind Secret (the kubelet updates the mounted files in place).
WATCH_SECONDS = 30.0


class IdentityError(RuntimeError):
    pass


def enabled() -> bool:
    return os.path.exists(PATHS.identity_conf_given)


def credential_problem(name: str, value: str) -> str | None:
    """Why sssd.conf cannot carry this bind Secret value (one line, kept as it is: sssd trims each
    value, so anything else would be another DN or password); None if it can. The operator's
    DirectoryReady condition asks the same (reconcile/identity.py)."""
    if not value or value != value.strip() or any(c in value for c in "\r\n"):
        return (f"the bind Secret's key {name!r} must be one line, without leading or trailing spaces "
                "(sssd.conf cannot carry anything else)")
    return None


def credential_value(raw: str) -> str:
    """A Secret file's text as the bind value: one trailing newline (an editor's) is not part of it."""
    return raw[:-1] if raw.endswith("\n") else raw


def _credential(name: str) -> str | None:
    path = os.path.join(PATHS.identity_bind_dir, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        value = credential_value(fh.read())
    problem = credential_problem(name, value)
    if problem:
        raise IdentityError(problem)
    return value


def sssd_conf(given: str, enumerate_users: bool) -> str:
    """The operator's sssd.conf, with the bind credentials (when the spec names a bind Secret) and
    enumeration appended to its last section, the domain's."""
    dn, password = _credential(BIND_DN_FILE), _credential(BIND_PASSWORD_FILE)
    if (dn is None) != (password is None):
        raise IdentityError(f"the bind Secret needs both {BIND_DN_FILE!r} and {BIND_PASSWORD_FILE!r}")
    extra = ""
    if dn is not None:
        extra += f"ldap_default_bind_dn = {dn}\nldap_default_authtok_type = password\nldap_default_authtok = {password}\n"
    if enumerate_users:
        extra += ENUMERATE
    return given.rstrip("\n") + "\n" + extra


def write_private(path: str, text: str) -> None:
    """Root's, 0600 from its first byte (sssd refuses any other mode), swapped in whole."""
    os.makedirs(os.path.dirname(path), mode=0o711, exist_ok=True)
    private_file.write_private(path, text.encode())


def prepare_state(root: str = PATHS.sss_state) -> None:
    for sub, mode in STATE_DIRS:
        path = os.path.join(root, sub)
        os.makedirs(path, exist_ok=True)
        os.chown(path, 0, 0)
        os.chmod(path, mode)


def clear_sockets(pipes: str = PATHS.sss_pipes) -> None:
    """A stopped SSSD leaves its socket files behind (in the state volume, which outlives the
    container): gone before a start, so that waiting for them waits for the new SSSD."""
    for directory in (pipes, os.path.join(pipes, "private")):
        for name in os.listdir(directory) if os.path.isdir(directory) else ():
            path = os.path.join(directory, name)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)


def _start(sup: Supervisor) -> None:
    clear_sockets()
    proc = sup.start("sssd", SSSD_ARGV, stdin=subprocess.DEVNULL)
    if not wait_for_path(f"{PATHS.sss_pipes}/nss", SOCKET_WAIT, proc):
        raise IdentityError(f"sssd did not open its sockets (exit code {proc.poll()}): see its lines above")


class CredentialsWatch:
    """A rotated bind Secret reaches SSSD without a new pod: sssd.conf is written again and SSSD
    restarted (its cache, on the state volume, stays). The ConfigMap's part is the one read at start:
    its change rolls the pods (render/identity.py), whose mounts may differ."""

    def __init__(self, sup: Supervisor, given: str, conf: str, enumerate_users: bool):
        self.sup, self.given, self.conf, self.enumerate_users = sup, given, conf, enumerate_users

    def __call__(self) -> None:
        try:
            conf = sssd_conf(self.given, self.enumerate_users)
        except (IdentityError, OSError, UnicodeDecodeError) as exc:  # half-updated or broken: keep what runs
            log(f"users from the directory: the bind Secret cannot be used, sssd keeps the last one: {exc}")
            return
        if conf == self.conf:
            return
        write_private(PATHS.sssd_conf, conf)
        old = self.sup.procs["sssd"]
        old.terminate()
        try:
            old.wait(timeout=30)
        except subprocess.TimeoutExpired:
            old.kill()
            old.wait()
        self.conf = conf
        try:
            _start(self.sup)
        except IdentityError as exc:  # an sssd that exited stops the node through the supervisor
            log(f"users from the directory: {exc}")
            return
        log("users from the directory: the bind Secret changed; sssd restarted with it")


def start_sssd(sup: Supervisor, enumerate_users: bool = False) -> bool:
    """SSSD for this node when the pod carries spec.identity's sssd.conf; whether it started."""
    if not enabled():
        return False
    with open(PATHS.identity_conf_given, encoding="utf-8") as fh:
        given = fh.read()
    conf = sssd_conf(given, enumerate_users)
    write_private(PATHS.sssd_conf, conf)
    prepare_state()
    _start(sup)
    sup.every(WATCH_SECONDS, CredentialsWatch(sup, given, conf, enumerate_users))
    log("users from the directory: sssd serves this node" + (", every user listed" if enumerate_users else ""))
    return True


def share_with_jail(jail: str) -> list[str]:
    """SSSD's public sockets and memory cache at their fixed paths in the jail, read-only, nosuid and
    nodev (connecting to a socket and mapping the cache need no more), with its private sockets
    (its internal bus, the privileged PAM socket) covered by an empty read-only tmpfs."""
    done = []
    for path in (PATHS.sss_pipes, PATHS.sss_memory_cache):
        if bind(path, jail + path):
            run_mount("-o", "remount,bind,ro,nosuid,nodev", jail + path)
            done.append(path)
    private = f"{jail}{PATHS.sss_pipes}/private"
    if private not in mount_points():
        run_mount("-t", "tmpfs", "-o", "ro,nosuid,nodev,noexec,size=4k,mode=0", "tmpfs", private)
        done.append(f"{PATHS.sss_pipes}/private (hidden)")
    return done
