"""Slurm's HealthCheckProgram on a worker: the program spec.healthCheck.program names is a path in the
jail, and runs there, confined as a job step is (the chroot plugin's C code: a new mount namespace
whose root is the jail, a small capability bounding set, no_new_privs, no user namespaces). Never on
the node's root: if the jail cannot be entered, nothing runs and slurmd logs why.

slurmd runs HealthCheckProgram as root with no arguments and an environment of its own
(SLURMD_NODENAME, SLURM_NODE_IS_HEALTHY), so the program's path comes from a file the worker
entrypoint writes from the pod's environment (PATHS.health_check_program)."""
from __future__ import annotations

import ctypes
import os

from .layout import PATHS

# What the program gets: slurmd's variables, and a PATH for the jail's tools (none in slurmd's).
PASSED = ("SLURMD_NODENAME", "SLURM_NODE_IS_HEALTHY")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class NotRun(RuntimeError):
    pass


def program(program_file: str = PATHS.health_check_program) -> str:
    try:
        with open(program_file, encoding="utf-8") as fh:
            path = fh.read().strip()
    except FileNotFoundError:
        raise NotRun(f"{program_file} is missing: this worker's pod has no health check program "
                     "(it predates spec.healthCheck; it gets one when it is replaced)") from None
    if not path.startswith("/"):
        raise NotRun(f"{program_file}: {path!r} is not an absolute path in the jail")
    return path


def enter(jail: str, lib_path: str) -> None:
    """Into the jail, confined as a job step's task; NotRun if any part fails (then the process must
    not go on: it may be in a private mount namespace, never in the jail half-made)."""
    lib = ctypes.CDLL(lib_path)
    err = ctypes.create_string_buffer(512)
    for what, call in (("the jail is not usable", lambda: lib.soperator_check_jail(jail.encode(), err, len(err))),
                       ("cannot enter the jail", lambda: lib.soperator_enter_jail(jail.encode(), err, len(err))),
                       ("cannot confine it", lambda: lib.soperator_restrict_task(0, err, len(err)))):
        if call() != 0:
            raise NotRun(f"{what}: {err.value.decode(errors='replace')}")


def run(jail: str, lib_path: str, program_file: str = PATHS.health_check_program) -> int:
    """Exec the program in the jail; on failure print why (slurmd logs a health check's output) and
    return non-zero, having run nothing."""
    try:
        path = program(program_file)
        enter(jail, lib_path)
        env = {k: os.environ[k] for k in PASSED if k in os.environ} | {"PATH": PATH}
        os.execve(path, [path], env)
    except (NotRun, OSError) as exc:
        print(f"soperator: health check not run (nothing ran on the node's root either): {exc}", flush=True)
        return 1
    return 1  # not reached: execve returns only by raising
