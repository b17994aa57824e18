"""Node container entrypoint: `python3 -m soperator_node [controller|worker|login|hold-nodes|release-nodes]`,
and the images' helpers (health-check, session-limits; image-cache and jail-enroot on Pyxis workers).

The role defaults to $SOPERATOR_COMPONENT, which the rendered pod spec sets.
"""
from __future__ import annotations

import os
import subprocess
import sys

from . import health_check, image_cache, jail_enroot, session_limits
from .layout import ENV, PATHS
from .roles import JAIL, ONE_SHOT, ROLES, NodeError
from .supervise import Supervisor, log


def write_termination_message(message: str) -> None:
    """The container's termination message (the pod's status shows it; the operator reads it)."""
    try:
        with open(PATHS.termination_log, "w", encoding="utf-8") as fh:
            fh.write(message[:4096])
    except OSError:
        pass  # not in a pod


def main(argv: list[str]) -> int:
    role = argv[0] if argv else os.environ.get(ENV.component, "")
    if role == "health-check":  # slurmd's HealthCheckProgram: runs it in the jail, supervises nothing
        return health_check.run(JAIL, PATHS.jail_lib, act=health_check.verdict)
    if role == "session-limits":  # pam_exec's, in sshd's session setup on login nodes
        return session_limits.main(argv[1:])
    if role == "image-cache":  # a Pyxis worker's daemon (the worker role starts it)
        return image_cache.serve()
    if role == "jail-enroot":  # the image cache's imports: enroot in the jail as its account
        return jail_enroot.main(argv[1:])
    if role not in ROLES and role not in ONE_SHOT:
        log(f"unknown role {role!r}; expected one of {', '.join(sorted([*ROLES, *ONE_SHOT]))}")
        return 2
    sup = Supervisor()
    try:
        (ROLES.get(role) or ONE_SHOT[role])(sup)
    except (NodeError, OSError, RuntimeError, subprocess.SubprocessError) as exc:
        log(f"{role} cannot start: {exc}")
        write_termination_message(str(exc))
        sup.stop()
        return 1
    if role in ONE_SHOT:
        sup.stop()  # its helpers (munged) go with it
        return 0
    return sup.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
