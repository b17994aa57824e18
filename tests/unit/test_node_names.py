"""A node waits, bounded and saying so, for the names its daemons need. Run in a network namespace of
its own with only loopback: a name /etc/hosts lacks fails at once, and no query leaves the machine."""
from __future__ import annotations

import subprocess
import sys

from tests.support_paths import ROOT

WAIT = """
import sys
from soperator.node.names import wait_for_names
try:
    wait_for_names(sys.argv[1:], timeout=1.5, poll=0.2)
except RuntimeError as exc:
    print("gave up:", exc)
else:
    print("resolved")
"""


def _wait(*names: str) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "--net", sys.executable, "-c", WAIT, *names], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_names_that_resolve_start_the_daemons_at_once():
    proc = _wait("localhost")
    assert proc.stdout.strip() == "resolved" and proc.stderr == "", proc


def test_a_name_that_never_resolves_is_waited_for_then_named_in_the_error():
    proc = _wait("localhost", "e2e-controller-0")
    assert proc.stdout.startswith("gave up: names did not resolve within 2 s: e2e-controller-0 ("), proc
    assert "localhost" not in proc.stdout
    # One line while waiting, not one per attempt.
    assert proc.stderr.count("waiting for e2e-controller-0 to resolve") == 1, proc.stderr
