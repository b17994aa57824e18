"""Jobs' private /tmp and /dev/shm bases on a worker (the SPANK plugin makes and removes each job's
directory in them: spank_chroot/job_dirs.c).

A container that starts has no job running: its predecessor's steps died with it, and their epilogs
never ran. So whatever a base holds then is left over, and goes before slurmd starts.
"""
from __future__ import annotations

import os
import shutil

from .layout import PATHS

BASES = (PATHS.job_tmp, PATHS.job_shm)


def clear_job_dirs(bases: tuple[str, ...] = BASES) -> str:
    """Each base emptied (made if missing, root's, 0700); what was left over, for the log."""
    left = 0
    for base in bases:
        os.makedirs(base, mode=0o700, exist_ok=True)
        os.chown(base, 0, 0)
        os.chmod(base, 0o700)
        with os.scandir(base) as entries:
            for entry in entries:
                left += 1
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
    return f"jobs' private tmp and shm directories: {left} left over from a previous container, removed"
