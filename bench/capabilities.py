"""Which capability each node container really needs: `python -m bench.capabilities [CAP ...]`.

For every capability the rendered worker and login containers add (NODE_CAPABILITIES,
LOGIN_CAPABILITIES), run the e2e user path (tests/e2e: populate, controller, two workers, login, ssh,
a two-node sbatch in the jail, the security checks) with that one capability removed from the pods,
and report whether it still passes. A capability whose removal leaves the path green is not needed.
Counts, not timings; each run takes about a minute and a half.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from soperator.render.nodes import LOGIN_CAPABILITIES, NODE_CAPABILITIES

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/e2e/test_jail_e2e.py::test_ssh_to_login_and_sbatch_a_two_node_job_in_the_jail"


def run_without(capability: str) -> tuple[bool, str, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", TEST],
                          cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "SOPERATOR_E2E_DROP_CAPABILITY": capability})
    failure = next((ln.strip() for ln in proc.stdout.splitlines() if ln.startswith("E ")), "")
    return proc.returncode == 0, failure[:140], time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capabilities", nargs="*", default=sorted(set(NODE_CAPABILITIES + LOGIN_CAPABILITIES)))
    args = parser.parse_args(argv)
    needed = 0
    print("| capability removed | e2e path | first failure |\n| --- | --- | --- |")
    for cap in args.capabilities:
        ok, failure, seconds = run_without(cap)
        needed += not ok
        print(f"| {cap} | {'passes: not needed' if ok else 'fails: needed'} ({seconds:.0f} s) | {failure} |",
              flush=True)
    print(f"{needed} of {len(args.capabilities)} capabilities are needed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
