"""sshd's AuthorizedKeysCommand with spec.identity: `directory-keys USER` prints the user's keys from
the directory (SSSD's sss_ssh_authorizedkeys, sshPublicKey), unless the jail's own files have a user
of that name. NSS takes the local account first (`files sss`), SSSD's key lookup asks by name only:
without this, a directory entry named like a local user would let its keys log in as that user.

Run at every login, as `python3 -S -P -m soperator_node.directory_keys`: it imports nothing but the
layout, so that it costs a login a few milliseconds (bench/identity.py)."""
from __future__ import annotations

import os
import sys

from .layout import PATHS


def local_names(passwd: str = "/etc/passwd") -> set[str]:
    """The names in the node's account file: on every node a link to the jail's (mounts.py)."""
    try:
        with open(passwd, encoding="utf-8", errors="replace") as fh:
            return {line.split(":", 1)[0] for line in fh if ":" in line}
    except OSError:
        return set()


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0] or argv[0] in local_names():
        return 0  # no keys from the directory: sshd goes by the user's authorized_keys alone
    os.execv(PATHS.sss_authorized_keys, [PATHS.sss_authorized_keys, argv[0]])
    return 1  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
