"""Rules for the paths a user gives: where the jail lives on a node, where sub-mounts go inside it.

A path must be absolute and canonical (no '.', '..', '//' or trailing '/'), so that '/.', '/proc/..'
or '/x/../etc' cannot slip past the checks below: the check sees the path the kubelet will mount.
Both rules are also written as a pattern and CEL for the CRD.
"""
from __future__ import annotations

import re
from typing import Annotated, Iterable

from pydantic import AfterValidator, Field, WithJsonSchema

from soperator.api.fields import cel
from soperator.node.layout import PATHS
from soperator.node.mounts import ACCOUNT_FILES, CONTAINERS, LOGIN, WORKER

# Components other than '.' and '..' (a name holding a character other than '.', or '...'), of
# characters other than '/' and control characters.
_C = r"[^/\x00-\x1f\x7f]"
CANONICAL_PATTERN = rf"^(/({_C}*[^./\x00-\x1f\x7f]{_C}*|\.\.\.+))+$"

# Inside the jail: what the node binds over it (Slurm config, munge socket, spool, /dev, /sys, /tmp,
# the plugin dir, /proc, the account files, and on Pyxis node sets enroot's and Pyxis's runtime
# directories and enroot.conf). A sub-mount on, above or below one would hide it. /etc/slurm too: a
# slurm.conf there would shadow the configless copy the node keeps current.
_BOUND = {b.path for b in WORKER + LOGIN + CONTAINERS} | set(ACCOUNT_FILES) | {"/proc", PATHS.slurm_config_dir,
                                                                            PATHS.jail_enroot_conf}
# The jail's own links (Debian's): a mount at /var/run/munge lands on /run/munge. A bound path is
# reserved by each name that reaches it.
JAIL_LINKS = {"/var/run": "/run", "/var/lock": "/run/lock"}
JAIL_RESERVED = tuple(sorted(_BOUND | {link + r[len(target):] for r in _BOUND for link, target in JAIL_LINKS.items()
                                       if r == target or r.startswith(target + "/")}))
# Directories every user of the jail may write (sticky or not): a program root runs from there could
# be replaced by anyone.
WORLD_WRITABLE = tuple(sorted(("/dev/mqueue", PATHS.shm, "/run/lock", "/tmp", "/var/lock", "/var/tmp")))


def world_writable(path: str) -> str | None:
    """The world-writable directory `path` lies in, or None."""
    return next((d for d in WORLD_WRITABLE if path.startswith(d + "/")), None)
# On the node: a jail here would let populate-jail overwrite the host's own system.
HOST_RESERVED = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/root", "/run",
                 "/sbin", "/sys", "/usr", "/var/lib/containerd", "/var/lib/docker", "/var/lib/kubelet",
                 "/var/log", "/var/run")


def overlapping(path: str, others: Iterable[str]) -> str | None:
    """The first of `others` that is `path`, lies inside it or holds it."""
    for r in others:
        if path == r or path.startswith(r + "/") or r.startswith(path + "/"):
            return r
    return None


def overlap_rule(a: str, b: str) -> str:
    """CEL: paths `a` and `b` are one, or one lies inside the other (the CRD's `overlapping`)."""
    return f"{a} == {b} || {a}.startsWith({b} + '/') || {b}.startsWith({a} + '/')"


def _check_canonical(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{value!r} must be an absolute path")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError(f"{value!r} holds a control character")
    if value != "/" and any(p in ("", ".", "..") for p in value.split("/")[1:]):
        raise ValueError(f"{value!r} is not canonical: write it without '.', '..', '//' or a trailing '/'")
    return value


def _path_outside(reserved: tuple[str, ...], at_root: str, overlap: str, cel_message: str, max_length: int = 1024):
    """A canonical path that is not '/' and does not overlap `reserved`, checked by the models and,
    as pattern + CEL, by the CRD. `overlap` is formatted with the path and the reserved path hit."""
    def check(value: str) -> str:
        _check_canonical(value)
        if value == "/":
            raise ValueError(at_root)
        hit = overlapping(value, reserved)
        if hit:
            raise ValueError(overlap.format(path=value, hit=hit))
        return value

    names = ", ".join(f"'{r}'" for r in reserved)
    rule = f"![{names}].exists(r, {overlap_rule('self', 'r')})"
    schema = {"type": "string", "maxLength": max_length, "pattern": CANONICAL_PATTERN,
              "x-kubernetes-validations": [{"rule": rule, "message": cel_message}]}
    return Annotated[str, AfterValidator(check), Field(max_length=max_length), WithJsonSchema(schema)]


# 256 characters: the apiserver prices a CEL rule by its strings' longest length, and the rules that
# compare every node set's mounts with the jail's would not fit its budget with more.
JailSubMountPath = _path_outside(JAIL_RESERVED, "a sub-mount cannot cover the jail root",
                                 "{path!r} overlaps {hit}, which the node binds into the jail",
                                 "overlaps a path the node binds into the jail", max_length=256)
JailHostPath = _path_outside(HOST_RESERVED, "the jail cannot be the node's root filesystem",
                             "{path!r} overlaps the node's {hit}: populate-jail would overwrite the host",
                             "overlaps a system directory of the node")
def _root_may_run(value: str) -> str:
    _check_canonical(value)
    where = world_writable(value)
    if where:
        raise ValueError(f"{value!r} lies in {where}, which every user can write: root would run what any user "
                         "put there")
    return value


# A program slurmd runs as root, named by its absolute path in the jail, outside world-writable directories.
ProgramPath = Annotated[str, Field(
    max_length=1024, pattern=r"^(/([A-Za-z0-9_+.-]*[A-Za-z0-9_+-][A-Za-z0-9_+.-]*|\.\.\.+))+$",
    json_schema_extra=cel((f"!{list(WORLD_WRITABLE)}.exists(r, self.startsWith(r + '/'))",
                           "a program root runs may not lie in a directory every user can write"))),
    AfterValidator(_root_may_run)]


def host_path_values_schema() -> dict:
    """The same rule for the storage chart's PV hostPath, as JSON Schema for values.schema.json
    (empty: no hostPath PV). Ancestors of a reserved path are listed; descendants match a pattern."""
    ancestors = sorted({r[:i] for r in HOST_RESERVED for i in range(1, len(r)) if r[i] == "/"})
    below = "^(" + "|".join(re.escape(r) for r in HOST_RESERVED) + ")(/|$)"
    return {"type": "string", "anyOf": [
        {"maxLength": 0},
        {"pattern": CANONICAL_PATTERN, "not": {"anyOf": [{"pattern": below}, {"enum": ancestors}]}}]}
