"""Files only their owner may read (daemon keys, sssd.conf, root's authorized_keys): created beside
the target with their final mode and owner before the first byte, so no other user can read them at
any moment, then swapped in whole, so a reader never sees half of one."""
from __future__ import annotations

import os


def write_private(path: str, data: bytes, mode: int = 0o600, owner: tuple[int, int] | None = None) -> None:
    """`owner`: (uid, gid), root's when None."""
    tmp = f"{path}.new"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as fh:
        if owner is not None:
            os.fchown(fh.fileno(), *owner)
        fh.write(data)
    os.replace(tmp, path)
