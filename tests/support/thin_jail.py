"""A thin jail for tests: its own /etc, /home, /tmp; the host's /usr bound read-only at use time.

Building it costs ~20 ms (no debootstrap); it runs bash, Slurm's stepd and the Slurm clients because
those all live in the host's /usr (merged-/usr Debian: /bin, /lib are symlinks into it).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

MARKER = "soperator-test-jail"
DIRS = ("home", "root", "tmp", "dev", "sys", "proc", "run", "usr", "var/spool/slurmd", "etc/slurm",
        "opt/soperator/lib", "mnt")
LINKS = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}


def make_thin_jail(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    for d in DIRS:
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    for name, target in LINKS.items():
        (root / name).symlink_to(target)
    for name in ("passwd", "group", "nsswitch.conf"):
        shutil.copyfile(f"/etc/{name}", root / "etc" / name)
    (root / "etc" / "hosts").write_text("")
    (root / "etc" / "resolv.conf").write_text("")
    (root / "etc" / "os-release").write_text(f'ID={MARKER}\nPRETTY_NAME="soperator test jail"\n')
    (root / "jail-marker").write_text(MARKER + "\n")
    return root


def reach_slurmctld_from(jail: Path, box, slurm_conf: str, controller: str) -> None:
    """What a worker's jail has and a thin one lacks, for a job's own `scontrol`: the Slurm user (the
    sandbox `box`'s), the config (a pod binds slurmd's configless copy) and the controller's address."""
    (jail / "etc" / "slurm" / "slurm.conf").write_text(slurm_conf)
    (jail / "etc" / "hosts").write_text(f"127.0.0.1 localhost {controller}\n")
    for name in ("passwd", "group"):
        line = box.run("getent", name, "slurm").stdout
        with open(jail / "etc" / name, "a") as fh:
            fh.write(line)
