"""The operator chart's seccomp-profiles DaemonSet: put the chart's profiles into the node's kubelet
seccomp directory, where a pod's `Localhost` profile is read when its container is created, then stay
(a DaemonSet's pod runs for as long as the node does). A file is replaced whole (rename), never
written in place: the kubelet may read it at any moment."""
from __future__ import annotations

import logging
import os
import signal
import tempfile
from pathlib import Path

log = logging.getLogger("soperator.seccomp")


def install_profiles(source: Path, target: Path) -> list[str]:
    """Copy each *.json of `source` into `target` where it differs; return the names written. Files
    of other names there stay: pods created before a profile changed may still need theirs."""
    for leftover in target.glob(".*.json.*"):  # a copy cut short by a kill
        leftover.unlink()
    written = []
    for profile in sorted(source.glob("*.json")):
        data = profile.read_bytes()
        dest = target / profile.name
        if dest.is_file() and dest.read_bytes() == data:
            continue
        fd, tmp = tempfile.mkstemp(dir=target, prefix=f".{profile.name}.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(profile.name)
    return written


def install_and_stay(source: Path, target: Path) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    written = install_profiles(source, target)
    log.info("seccomp profiles in %s: %s", target, ", ".join(written) or "already current")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        signal.pause()
