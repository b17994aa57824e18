"""Bind mounts between a node container and the jail.

After the SPANK plugin moves a job step into the jail (the jail mounted over / and chrooted into,
spank_chroot/jail.c), slurmstepd itself lives there, so the jail must show the node's own hosts
file, Slurm config, spool, munge socket, devices and /tmp at the same paths; otherwise the step
cannot report back to slurmctld. Login sessions (which sshd's PAM account step moves into the jail,
spank_chroot/pam_jail.c) need the same, plus /proc. These mounts live in the container's mount
namespace only, although the jail volume itself is shared by every node.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from .layout import PATHS


@dataclass(frozen=True)
class Bind:
    path: str            # the same path on the node and inside the jail
    is_dir: bool = True
    recursive: bool = False
    read_only: bool = False
    # Left out when the jail has this file of its own: the jail's copy is what its Slurm can load.
    unless_jail_has: str | None = None
    # Made (a directory, root's, 0755) when the node has none yet: a bind that guards something must
    # never be skipped for a missing source, as other binds are.
    make: bool = False


COMMON = (
    Bind("/etc/hosts", is_dir=False),
    Bind("/etc/resolv.conf", is_dir=False),
    # The configless copy of the Slurm configuration (slurmd's, or sackd's on login nodes): Slurm
    # commands find it at /run/slurm/conf when /etc/slurm has no slurm.conf, as in the jail.
    Bind(PATHS.configless_dir, read_only=True),
    # Read-only: clients and slurmstepd only connect to the socket (which a read-only mount allows);
    # root in the jail could otherwise put a socket of its own in munged's place.
    Bind(PATHS.munge_run_dir, read_only=True),
    Bind("/dev", recursive=True),
    Bind("/sys", recursive=True, read_only=True),
    Bind("/tmp"),
    # The jail plugin for the jail's own Slurm clients (srun, sbatch read plugstack.conf too). A jail
    # image carries its copy, built for the jail's Slurm release, which may be older than the node's
    # while a cluster upgrades (measured: the jail's 24.11 srun refuses the node's 26.05 plugin,
    # "Incompatible plugin version"); the node's is lent only to a jail without one.
    Bind(PATHS.lib_dir, read_only=True, unless_jail_has=PATHS.chroot_plugin),
)
# The spool stays writable (slurmstepd removes its socket and the batch script from the jail's side);
# the configuration slurmd fetched into it is read-only there (slurmd writes it through its own path).
WORKER = COMMON + (Bind(PATHS.worker_spool), Bind(PATHS.worker_conf_cache, read_only=True, make=True))
# Workers of a node set with Pyxis: Pyxis's and enroot's runtime files, node-local (the pod's volume),
# in parents of root's that users may not write.
CONTAINER_RUNTIME = (PATHS.pyxis_runtime, PATHS.enroot_runtime)
# The importer Pyxis runs in the jail (pyxis_importer.py), from the node image: the jail's own may be older.
# The image cache's entries read-only, on a mount of their own: no user can hard-link one (link(2)
# never crosses mounts) into a directory of theirs.
CONTAINERS = (*(Bind(path) for path in CONTAINER_RUNTIME), Bind(PATHS.enroot_credentials, read_only=True),
              Bind(PATHS.pyxis_importer_dir, read_only=True), Bind(PATHS.image_cache, read_only=True))
# Each step user's own directories in them, made by the chroot plugin as root ("%u": the uid). The
# worker lists them in PATHS.user_dirs_file (spank_chroot/user_dirs.h); enroot.conf.j2 and
# plugstack.conf.j2 name the same places.
USER_DIRS = (f"{PATHS.pyxis_runtime}/%u", f"{PATHS.enroot_runtime}/user-%u")
LOGIN = COMMON
# sshd looks users up on the node before it chroots: the node must see the jail's accounts.
ACCOUNT_FILES = ("/etc/passwd", "/etc/group", "/etc/shadow")


class MountError(RuntimeError):
    pass


@dataclass(frozen=True)
class Mount:
    root: str  # the directory of the file system mounted there: for a cgroup, the cgroup it shows
    point: str
    fstype: str
    read_only: bool
    super_options: tuple[str, ...]
    options: tuple[str, ...] = ()  # the mount's own (nosuid, nodev, relatime…)


def _unescape(path: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def parse_mountinfo(mountinfo: str) -> list[Mount]:
    """/proc/self/mountinfo's entries, in order. Fields: ID, parent, dev, root, mount point, mount
    options, optional fields, '-', type, source, super options."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 10 or "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        found.append(Mount(_unescape(fields[3]), _unescape(fields[4]), fields[sep + 1], "ro" in fields[5].split(","),
                           tuple(fields[sep + 3].split(",")) if len(fields) > sep + 3 else (),
                           tuple(fields[5].split(","))))
    return found


def mount_points() -> set[str]:
    with open("/proc/self/mountinfo") as fh:
        return {m.point for m in parse_mountinfo(fh.read())}


def run_mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MountError(f"mount {' '.join(args)}: {proc.stderr.strip()}")


def _ensure_target(target: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()


def bind(source: str, target: str, *, is_dir: bool = True, recursive: bool = False,
         read_only: bool = False) -> bool:
    """Bind source onto target unless something is already mounted there; True if it mounted."""
    if not os.path.exists(source):
        raise MountError(f"{source} does not exist on this node")
    if target in mount_points():
        return False
    _ensure_target(target, is_dir)
    run_mount("--rbind" if recursive else "--bind", source, target)
    if read_only:
        run_mount("-o", "remount,bind,ro", target)
    return True


def mount_private_proc(jail: str) -> bool:
    """A fresh /proc for login sessions, with hidepid=2: users see only their own processes.
    True if it mounted (False: already there)."""
    target = jail + "/proc"
    if target in mount_points():
        return False
    os.makedirs(target, exist_ok=True)
    run_mount("-t", "proc", "-o", "nosuid,nodev,noexec,hidepid=2", "proc", target)
    return True


def harden_jail(jail: str) -> list[str]:
    """Remount the jail and the volumes mounted inside it `nosuid,nodev`, before the node's own binds
    (/dev among them) go in: a setuid-root binary or a device node on the shared volume then gives a
    login session nothing. Returns what was remounted."""
    done = []
    for point in sorted(mount_points()):
        if point == jail or point.startswith(jail + "/"):
            run_mount("-o", "remount,bind,nosuid,nodev", point)
            done.append(point)
    return done


def wanted_in(jail: str, binds: tuple[Bind, ...]) -> list[Bind]:
    """The binds this jail gets: all but those whose file the jail has of its own."""
    return [b for b in binds if not (b.unless_jail_has and os.path.lexists(jail + b.unless_jail_has))]


def bind_into_jail(jail: str, binds: tuple[Bind, ...]) -> list[str]:
    """Make each node path visible at the same path in the jail; returns what was mounted."""
    done = []
    for b in wanted_in(jail, binds):
        if b.make:
            os.makedirs(b.path, mode=0o755, exist_ok=True)
        if os.path.exists(b.path) and bind(b.path, jail + b.path, is_dir=b.is_dir, recursive=b.recursive,
                                           read_only=b.read_only):
            done.append(b.path)
    return done


def use_jail_accounts(jail: str) -> list[str]:
    """Point the node's account files at the jail's, by symlink: unprivileged containers cannot
    mount, and users added in the jail later are seen at once."""
    done = []
    for path in ACCOUNT_FILES:
        target = jail + path
        if not os.path.exists(target):
            continue
        if os.path.islink(path) and os.readlink(path) == target:
            continue
        tmp = f"{path}.soperator-link"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(target, tmp)
        os.replace(tmp, path)
        done.append(path)
    return done
