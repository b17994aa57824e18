"""slurmd's HealthCheckProgram wrapper (soperator/node/health_check.py) with the real jail code: the
spec's program runs in the jail, confined as a job step's task, or not at all."""
from __future__ import annotations

import os
import sys

import pytest

from soperator.node import health_check
from tests.spank.test_jail_binding import _bind_usr, _in_child, lib_mod
from tests.support.thin_jail import MARKER, make_thin_jail

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
CAP_SYS_ADMIN = 21
# What the program reports: that it is in the jail, whether the node's root shows, its bounding set,
# and what slurmd passed it.
PROGRAM = """#!/bin/sh
cat /jail-marker
test -e {host_only} && echo host-visible || echo host-hidden
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status | tr '\\n' ' '; echo
echo "node=$SLURMD_NODENAME healthy=$SLURM_NODE_IS_HEALTHY python=${{PYTHONPATH:-unset}} path=$PATH"
"""


def _run(jail: str, program_file: str, env: dict[str, str]) -> tuple[int, str]:
    def child(out):
        os.dup2(out, 1)
        sys.stdout = os.fdopen(1, "w")  # not pytest's capture: the wrapper's message goes where slurmd reads
        if os.path.isdir(jail):
            _bind_usr(jail)
        os.environ.clear()
        os.environ.update(env)
        return health_check.run(jail, lib_mod.__file__, program_file)

    code, data = _in_child(child)
    return code, data.decode()


def test_the_program_runs_in_the_jail_without_node_privileges(tmp_path):
    jail = make_thin_jail(tmp_path / "jail")
    host_only = tmp_path / "on-the-node-only"
    host_only.write_text("x")
    (jail / "usr-local-check").write_text(PROGRAM.format(host_only=host_only))
    os.chmod(jail / "usr-local-check", 0o755)
    program_file = tmp_path / "health-check-program"
    program_file.write_text("/usr-local-check\n")

    code, out = _run(str(jail), str(program_file), {"SLURMD_NODENAME": "w-0", "SLURM_NODE_IS_HEALTHY": "yes",
                                                    "PYTHONPATH": "/opt/soperator"})
    assert code == 0, out
    marker, seen, status, passed = out.strip().splitlines()
    assert (marker, seen) == (MARKER, "host-hidden")
    fields = dict(zip(status.split()[::2], status.split()[1::2]))
    for name in ("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"):  # root, but as a job step's task
        assert not int(fields[name], 16) & (1 << CAP_SYS_ADMIN), status
    assert fields["NoNewPrivs:"] == "1" and fields["Seccomp:"] == "2", status  # the seccomp filters hold
    assert passed == f"node=w-0 healthy=yes python=unset path={health_check.PATH}"


@pytest.mark.parametrize("case", ["no-jail", "no-program-file", "relative", "missing-program"])
def test_nothing_runs_on_the_node_when_the_jail_or_program_is_not_there(tmp_path, case):
    """Fail closed: the program (here a node path that exists) never runs on the node's root."""
    jail = make_thin_jail(tmp_path / "jail")
    mark = tmp_path / "ran"
    program = tmp_path / "node-program"
    program.write_text(f"#!/bin/sh\ntouch {mark}\n")
    os.chmod(program, 0o755)
    program_file = tmp_path / "health-check-program"
    program_file.write_text({"relative": "node-program", "missing-program": "/absent"}.get(case, str(program)))
    if case == "no-program-file":
        program_file.unlink()
    code, out = _run(str(tmp_path / "absent-jail") if case == "no-jail" else str(jail), str(program_file), {})
    assert code == {"no-jail": health_check.JAIL_FAILED, "missing-program": health_check.EXEC_FAILED}.get(case, 1), out
    assert not mark.exists() and out.startswith(health_check.NOT_RUN), out
    expected = {"no-jail": "the jail is not usable", "no-program-file": "has no health check program",
                "relative": "is not an absolute path in the jail", "missing-program": "No such file"}[case]
    assert expected in out, out
