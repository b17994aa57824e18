"""Where things live inside the pods. The node images' entrypoints use the same paths."""
from __future__ import annotations

from types import SimpleNamespace

PATHS = SimpleNamespace(
    jail="/mnt/jail",
    slurm_config_dir="/etc/slurm",
    controller_spool="/var/spool/slurmctld",
    worker_spool="/var/spool/slurmd",
    # A file, not /dev/stderr: slurmstepd logs there too and has no stderr of its own.
    slurmd_log="/var/log/slurm/slurmd.log",
    munge_key_dir="/etc/soperator/munge",
    jwt_key_dir="/etc/soperator/jwt",
    # The controller entrypoint copies the JWT key here, owned by SlurmUser and readable by it only.
    jwt_key="/run/slurmctld-jwt/jwt_hs256.key",
    ssh_host_keys="/etc/ssh/keys",
    sshd_config_dir="/etc/ssh/soperator",
    # The login entrypoint copies root's keys here from the ConfigMap: kubelet makes a ConfigMap
    # volume's directory world-writable (0777), and sshd's StrictModes refuses keys under it.
    root_authorized_keys="/run/soperator/root_authorized_keys",
    chroot_plugin="/opt/soperator/lib/spank_chroot.so",
    # slurmd's HealthCheckProgram on workers: it runs spec.healthCheck.program in the jail.
    health_check="/opt/soperator/bin/health-check",
    pyxis_plugin="/usr/local/lib/slurm/spank_pyxis.so",
    # Node-local, bound into the jail at the same paths on workers with Pyxis (soperator/node/mounts.py).
    pyxis_runtime="/run/pyxis",
    enroot_runtime="/run/enroot",
    enroot_credentials="/etc/soperator/enroot",
    populate_target="/jail",
    # Where the kubelet keeps a node container's termination message: not /dev/termination-log, since
    # /dev goes into the jail and the kubelet makes that host file writable by anyone (security #5).
    termination_log="/run/termination-log",
)

MUNGE_KEY_FILE = "munge.key"
JWT_KEY_FILE = "jwt_hs256.key"
SSH_HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")
CONFIG_HASH_ANNOTATION = "slurm.soperator.dev/config-hash"
