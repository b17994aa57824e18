"""A cluster that gains accounting keeps running.

slurmctld's first start makes a ClusterID and keeps it in StateSaveLocation/clustername. The
operator adds accounting to slurm.conf only once slurmdbd answers, so slurmctld already has an ID
when it first registers, and slurmdbd records the cluster under an ID of its own making; slurmctld
then exits ("CLUSTER ID MISMATCH", measured on the real node: at the reconfigure that turned
accounting on, and at every later start). No client shows slurmdbd's ID (sacctmgr's `ID` is the
federation's). So, before slurmctld starts and before a reconfigure, the controller makes sure
slurmdbd knows the cluster (adding it if not) and drops the kept ID: slurmctld takes slurmdbd's and
writes it back. This StateSaveLocation is this cluster's own volume: the mismatch is the late
registration, not two clusters sharing it. While slurmdbd does not answer, the file stays, and
slurmctld starts from its state and keeps scheduling.
"""
from __future__ import annotations

import os
import re

from .associations import ACCOUNTING_LINE, sacctmgr
from .supervise import log

_CLUSTER_NAME = re.compile(r"^\s*ClusterName\s*=\s*(\S+)\s*$", re.M | re.I)


def take_cluster_id_from_database(slurm_conf: str, state_dir: str) -> bool:
    """True if the kept ID was dropped for slurmdbd's."""
    with open(slurm_conf) as fh:
        conf = fh.read()
    name = _CLUSTER_NAME.search(conf)
    path = os.path.join(state_dir, "clustername")
    if not name or not ACCOUNTING_LINE.search(conf) or not os.path.exists(path):
        return False
    with open(path) as fh:
        kept_name, _, kept_id = fh.read().strip().partition("|")
    if kept_name != name[1]:
        return False  # slurmctld's own name check speaks for this
    known = sacctmgr("show", "cluster", name[1], "format=cluster")
    if known.returncode != 0:
        return False
    if known.stdout.split() != [name[1]]:
        added = sacctmgr("add", "cluster", name[1])
        if added.returncode != 0:
            log(f"sacctmgr add cluster {name[1]}: {added.stderr.strip() or added.stdout.strip()}")
            return False
    os.unlink(path)
    log(f"ClusterID {kept_id} dropped: slurmctld takes the one slurmdbd holds for cluster {name[1]}")
    return True
