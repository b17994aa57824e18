"""spec.identity on a node: SSSD beside the Slurm daemons, serving the node and its jail.

sssd.conf comes from the operator without credentials; the bind DN and password are added here from
the admin's Secret, so they live only in that Secret and in this container's root-only file. SSSD
runs as root in the foreground (its clients check that the PAM socket is root's); its sockets and
memory cache are bound into the jail, so job steps and login sessions resolve the same users. SSSD
starts whether or not the directory answers: offline, it serves the users in its cache.
"""
from __future__ import annotations

import os
import subprocess

from .layout import BIND_DN_FILE, BIND_PASSWORD_FILE, PATHS
from .supervise import Supervisor, log, wait_for_path

# sssd's own directories in its state volume (an emptyDir, empty at a pod's first start), with the
# modes its package gives them.
STATE_DIRS = (("", 0o755), ("db", 0o700), ("mc", 0o775), ("pipes", 0o755), ("pipes/private", 0o700),
              ("pubconf", 0o755), ("gpo_cache", 0o755), ("secrets", 0o700), ("deskprofile", 0o711))
# The controller lists every directory user for its accounting sync (associations.py), refreshed
# this often; other nodes only look users up.
ENUMERATE = "enumerate = true\nldap_enumeration_refresh_timeout = 60\n"
SOCKET_WAIT = 60.0


class IdentityError(RuntimeError):
    pass


def enabled() -> bool:
    return os.path.exists(PATHS.identity_conf_given)


def _credential(name: str) -> str | None:
    path = os.path.join(PATHS.identity_bind_dir, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        value = fh.read()
    value = value[:-1] if value.endswith("\n") else value
    # sssd.conf holds one value a line, trimmed: anything else would be a different password.
    if not value or value != value.strip() or any(c in value for c in "\r\n"):
        raise IdentityError(f"the bind Secret's key {name!r} must be one line, without leading or trailing "
                            "spaces (sssd.conf cannot carry anything else)")
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
    tmp = f"{path}.new"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def prepare_state(root: str = PATHS.sss_state) -> None:
    for sub, mode in STATE_DIRS:
        path = os.path.join(root, sub)
        os.makedirs(path, exist_ok=True)
        os.chown(path, 0, 0)
        os.chmod(path, mode)


SSSD_ARGV = ["sssd", "-i", "--logger=stderr"]
# How often a node looks for a rotated bind Secret (the kubelet updates the mounted files in place).
WATCH_SECONDS = 30.0


def _composed(enumerate_users: bool) -> str:
    with open(PATHS.identity_conf_given, encoding="utf-8") as fh:
        return sssd_conf(fh.read(), enumerate_users)


def _start(sup: Supervisor) -> None:
    proc = sup.start("sssd", SSSD_ARGV, stdin=subprocess.DEVNULL)
    if not wait_for_path(f"{PATHS.sss_pipes}/nss", SOCKET_WAIT, proc):
        raise IdentityError(f"sssd did not open its sockets (exit code {proc.poll()}): see its lines above")


class CredentialsWatch:
    """A rotated bind Secret reaches SSSD without a new pod: sssd.conf is written again and SSSD
    restarted (its cache, on the state volume, stays). sssd.conf itself comes from the ConfigMap, whose
    change rolls the pods (render/identity.py)."""

    def __init__(self, sup: Supervisor, conf: str, enumerate_users: bool):
        self.sup, self.conf, self.enumerate_users = sup, conf, enumerate_users

    def __call__(self) -> None:
        try:
            conf = _composed(self.enumerate_users)
        except (IdentityError, OSError) as exc:  # half-updated or broken: keep what runs, say why
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
        _start(self.sup)
        self.conf = conf
        log("users from the directory: the bind Secret changed; sssd restarted with it")


def start_sssd(sup: Supervisor, enumerate_users: bool = False) -> bool:
    """SSSD for this node when the pod carries spec.identity's sssd.conf; whether it started."""
    if not enabled():
        return False
    conf = _composed(enumerate_users)
    write_private(PATHS.sssd_conf, conf)
    prepare_state()
    _start(sup)
    sup.every(WATCH_SECONDS, CredentialsWatch(sup, conf, enumerate_users))
    log("users from the directory: sssd serves this node" + (", every user listed" if enumerate_users else ""))
    return True
