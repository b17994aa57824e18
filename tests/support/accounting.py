"""Accounting on real daemons in one box: MariaDB (the database image, prepared by its entrypoint's
helpers), slurmdbd with the rendered slurmdbd.conf, slurmctld and one slurmd. For the accounting
tests and bench/accounting.py."""
from __future__ import annotations

import secrets
from contextlib import contextmanager
from pathlib import Path

from soperator.keys import generate_munge_key
from soperator.render.configs import (Storage, controller_host, slurm_files, slurmdbd_address, slurmdbd_conf,
                                      worker_node_conf)
from tests.conftest import make_cluster
from tests.support.slurm import SlurmSandbox, node_image
from tests.support.thin_jail import make_thin_jail


@contextmanager
def accounted_box(work: Path, name: str, extra: dict[str, str], cpus: int = 1, jail_users: dict[str, int] = None):
    """Yields the ready SlurmSandbox; its node is `<name>-cpu-0`. `jail_users`: name -> uid added to
    the jail's passwd (for jobs of users other than root)."""
    password = secrets.token_hex(16)
    cluster = make_cluster(name=name, nodeSets=[{"name": "cpu", "replicas": 1, "cpus": cpus}],
                           accounting={"enabled": True},
                           slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                                        "extra": extra})
    host = controller_host(cluster)
    files = slurm_files(cluster)
    # slurmdbd runs in the same box here: DbdHost is the box's name; slurmctld reaches it by the
    # address the rendered slurm.conf gives (mapped to the box in its /etc/hosts).
    files["slurmdbd.conf"] = slurmdbd_conf(cluster, host, Storage("127.0.0.1", 3306, "slurm", password))
    jail = make_thin_jail(work / "jail")
    with open(jail / "etc" / "passwd", "a") as fh:
        for user, uid in (jail_users or {}).items():
            fh.write(f"{user}:x:{uid}:{uid}::/tmp:/bin/sh\n")
    box = SlurmSandbox(work, files, host, generate_munge_key(), names=[f"{name}-cpu-0", slurmdbd_address(cluster)],
                       slurmd=f"{name}-cpu-0", node_conf=worker_node_conf(cluster.spec.node_sets[0]), jail=jail,
                       accounting={"database": "slurm_acct_db", "user": "slurm", "password": password},
                       image=node_image("database"))
    try:
        assert box.status["ready"], (box.status, box.log("mariadbd.log"), box.log("slurmdbd.log"),
                                     box.log("slurmctld.log"))
        yield box
    finally:
        box.close()
