"""Slurm's HealthCheckProgram on a worker: the program spec.healthCheck.program names is a path in the
jail, and runs there, confined as a job step is (the chroot plugin's C code: a new mount namespace
whose root is the jail, a small capability bounding set, no_new_privs, no user namespaces). Never on
the node's root: if the jail cannot be entered, nothing runs and slurmd logs why.

slurmd runs HealthCheckProgram as root with no arguments and an environment of its own
(SLURMD_NODENAME, SLURM_NODE_IS_HEALTHY), so the program's path comes from a file the worker
entrypoint writes from the pod's environment (PATHS.health_check_program).

The verdict is the program's exit code, as with NHC. A child process enters the jail and execs the
program; this one stays in the worker's container, where scontrol reaches slurmctld, and acts on the
result: a failure (or a jail the check cannot enter) drains the node, reason drains.HEALTH_CHECK and
the program's last line; a pass undoes only such a drain. A drain anyone else made (an admin's, or the
program's own `scontrol update`) is never replaced or undone. A missing program file (a pod older than
spec.healthCheck) or a program missing from the jail is no fault of the node: nothing is drained."""
from __future__ import annotations

import ctypes
import os
from typing import Callable

from .drains import HEALTH_CHECK, owned
from .fresh_boot import Record, record
from .layout import PATHS
from .scontrol import scontrol

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


def enter(jail: str, lib_path: str, as_session: bool = False) -> None:
    """Into the jail, confined as a job step's task; or, `as_session`, as a login session is (the
    node's bounding set kept: the image cache's root imports, jail_enroot.py). NotRun if any part
    fails (then the process must not go on: it may be in a private mount namespace, never in the
    jail half-made)."""
    lib = ctypes.CDLL(lib_path)
    err = ctypes.create_string_buffer(512)
    for what, call in (("the jail is not usable", lambda: lib.soperator_check_jail(jail.encode(), err, len(err))),
                       ("cannot enter the jail", lambda: lib.soperator_enter_jail(jail.encode(), err, len(err))),
                       ("cannot confine it", lambda: lib.soperator_restrict_sessions(0, err, len(err)) if as_session
                        else lib.soperator_restrict_task(0, err, len(err)))):
        if call() != 0:
            raise NotRun(f"{what}: {err.value.decode(errors='replace')}")


NOT_RUN = "health-check: not run (nothing ran on the node's root either): "
JAIL_FAILED, EXEC_FAILED = 126, 127  # the child's exit codes when the program could not start


def run(jail: str, lib_path: str, program_file: str = PATHS.health_check_program,
        act: Callable[[str, int, str], None] | None = None) -> int:
    """Run the program in the jail; `act` (verdict, in the worker) takes the node's name, the exit code
    and the output. Returns the exit code (non-zero, having run nothing, when it could not be run)."""
    try:
        path = program(program_file)
    except NotRun as exc:
        print(f"{NOT_RUN}{exc}", flush=True)
        return 1
    code, output = _run_in_jail(jail, lib_path, path)
    print(output, end="", flush=True)  # slurmd logs what its HealthCheckProgram says
    node = os.environ.get("SLURMD_NODENAME")
    # A program missing from the jail is the spec's or the jail's fault, not this node's.
    if act and node and code != EXEC_FAILED:
        act(node, code, output)
    return code


def _run_in_jail(jail: str, lib_path: str, path: str) -> tuple[int, str]:
    """(exit code, its output, stdout and stderr together)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller
        code = JAIL_FAILED
        try:
            os.close(read)
            os.dup2(write, 1)
            os.dup2(write, 2)
            enter(jail, lib_path)
            code = EXEC_FAILED
            env = {k: os.environ[k] for k in PASSED if k in os.environ} | {"PATH": PATH}
            os.execve(path, [path], env)
        except (NotRun, OSError) as exc:
            os.write(2, f"{NOT_RUN}{exc}\n".encode(errors="replace"))
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    with os.fdopen(read, "rb") as out:
        while chunk := out.read(65536):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def reason(code: int, output: str) -> str:
    """The drain reason of a failed check: its last line says why (NHC ends with its finding)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    said = lines[-1] if lines else (f"exit code {code}" if code > 0 else f"killed by signal {-code}")
    return f"{HEALTH_CHECK}: {said}"[:256]


def decision(node: Record, code: int, output: str) -> list[str]:
    """The scontrol update arguments the check's result asks for; [] for none."""
    ours = owned(node.state, node.reason, HEALTH_CHECK)
    if code == 0:
        return [f"NodeName={node.name}", "State=RESUME"] if ours else []
    why = reason(code, output)
    if "DRAIN" in node.state and not (ours and node.reason != why):
        return []  # someone else's drain, or already ours for this reason
    return [f"NodeName={node.name}", "State=DRAIN", f"Reason={why}"]


def verdict(node: str, code: int, output: str) -> None:
    """Apply the decision to the node as slurmctld has it now; Slurm's state unknown: nothing (the next
    run asks again)."""
    current, failure = record(node)
    if failure or current is None:
        print(f"health-check: verdict not applied, slurmctld did not say: {failure or 'no record'}")
        return
    update = decision(current, code, output)
    if update:
        scontrol("update", *update)
