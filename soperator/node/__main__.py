"""Node container entrypoint: `python3 -m soperator_node [controller|worker|login]`.

The role defaults to $SOPERATOR_COMPONENT, which the rendered pod spec sets.
"""
from __future__ import annotations

import os
import sys

from .roles import ROLES, NodeError
from .supervise import Supervisor, log


def main(argv: list[str]) -> int:
    role = argv[0] if argv else os.environ.get("SOPERATOR_COMPONENT", "")
    if role not in ROLES:
        log(f"unknown role {role!r}; expected one of {', '.join(sorted(ROLES))}")
        return 2
    sup = Supervisor()
    try:
        ROLES[role](sup)
    except (NodeError, OSError, RuntimeError) as exc:
        log(f"{role} cannot start: {exc}")
        sup._stop(None, None)
        return 1
    return sup.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
