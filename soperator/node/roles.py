"""What each node container does before its daemon starts, and the daemon itself."""
from __future__ import annotations

import ctypes
import os
import pwd
import resource
import shutil
import socket
import stat
import subprocess
import sys
import time

from . import layout, session_limits
from .associations import AssociationSync
from .cgroups import CgroupError, prepare_slurm_cgroups
from .cluster_id import take_cluster_id_from_database
from .database import ensure_account, prepare_datadir, server_argv
from .fresh_boot import forget_refusal, record, take_over
from .hold import hold, release
from .job_dirs import clear_job_dirs
from .layout import CGROUPS_UNAVAILABLE, ENV, FUSE_DEVICE, FUSE_UNAVAILABLE, PATHS
from .identity import share_with_jail, start_sssd
from .mounts import (CONTAINER_RUNTIME, CONTAINERS, LOGIN, USER_DIRS, WORKER, bind, bind_into_jail, harden_jail,
                     mount_private_proc, use_jail_accounts)
from .names import wait_for_names
from .placement import registration_conf, wait_for_place
from .private_file import write_private
from .reconfigure import ConfigWatch
from .scontrol import scontrol
from .supervise import Supervisor, log, wait_for_path

# Where the pod mounts the jail: render says so in the pod's environment.
JAIL = os.environ.get(ENV.jail, PATHS.jail)
# How long a node waits, before its daemon starts, for the controller's name to resolve and for
# slurmctld to answer: within the worker's liveness probe (8 x 15 s), so the reason is logged.
START_WAIT = 90.0
# How long a dynamic node waits for its place: the operator writes it on the pod's binding, and the
# kubelet shows it a moment later (measured: tests/kube/test_two_kernels.py).
PLACE_WAIT = 30.0


class NodeError(RuntimeError):
    pass


def install_key(given: str, path: str, owner: str, mode: int = 0o400) -> None:
    """Copy a key from its Secret volume to where its daemon reads it, readable by `owner` only."""
    if not os.path.exists(given):
        raise NodeError(f"key Secret not mounted at {given}")
    with open(given, "rb") as fh:
        key = fh.read()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    shutil.chown(os.path.dirname(path), owner, owner)
    account = pwd.getpwnam(owner)
    write_private(path, key, mode, (account.pw_uid, account.pw_gid))


def install_munge_key() -> None:
    """The key comes from the cluster's Secret; Debian's package bakes its own into every image."""
    install_key(PATHS.munge_key_given, PATHS.munge_key, "munge")
    for d in (PATHS.munge_run_dir, "/var/lib/munge", "/var/log/munge"):
        os.makedirs(d, exist_ok=True)
        shutil.chown(d, "munge", "munge")


def start_munged(sup: Supervisor) -> None:
    install_munge_key()
    proc = sup.start("munged", ["runuser", "-u", "munge", "--", "munged", "-F", "--log-file=/dev/stderr"])
    if not wait_for_path(PATHS.munge_socket, 30, proc):
        raise NodeError("munged did not create its socket")


def require_jail() -> None:
    """Refuse to start a jailed node on an empty or half-filled jail volume."""
    if not os.path.exists(os.path.join(JAIL, PATHS.populated)):
        raise NodeError(f"the jail at {JAIL} is not populated ({PATHS.populated} missing): has populate-jail run?")


def controller(sup: Supervisor) -> None:
    require_jail()
    # slurmctld looks up every job user's groups for the job credential.
    log(f"accounts from the jail: {', '.join(use_jail_accounts(JAIL))}")
    os.makedirs(PATHS.controller_spool, exist_ok=True)
    shutil.chown(PATHS.controller_spool, "slurm", "slurm")
    # slurmctld checks slurmrestd callers' tokens with it (AuthAltParameters=jwt_key=...).
    install_key(PATHS.jwt_key_given, PATHS.jwt_key, "slurm")
    start_munged(sup)
    # Directory users too (spec.identity), every one listed: the accounting sync below adds them.
    start_sssd(sup, enumerate_users=True)
    take_cluster_id_from_database(PATHS.slurm_conf, PATHS.controller_spool)
    sup.start("slurmctld", ["slurmctld", "-D", "-f", PATHS.slurm_conf])
    sup.every(5.0, ConfigWatch(PATHS.slurm_config_dir, os.path.join(PATHS.controller_spool, ".soperator-pushed"),
                               before=lambda: take_cluster_id_from_database(PATHS.slurm_conf, PATHS.controller_spool)))
    sup.every(10.0, AssociationSync(PATHS.slurm_conf))


def sticky_shm() -> None:
    """A kubelet makes the Memory emptyDir at /dev/shm 0777: without the sticky bit any user could
    delete or replace another user's MPI/NCCL segments. The runtime's own /dev/shm (login pods) is
    sticky already, and in a user namespace not the pod's to change: left as it is."""
    if os.path.isdir(PATHS.shm) and stat.S_IMODE(os.stat(PATHS.shm).st_mode) != 0o1777:
        os.chmod(PATHS.shm, 0o1777)


def restrict_sessions() -> None:
    """What job steps get from the SPANK plugin, for sshd and every session it starts: no_new_privs
    and, unless the cluster allows them, no user namespaces (the same C code, restrict.c). sshd keeps
    its capabilities: each connection's sshd enters the jail in PAM's account step and only then takes
    the tasks' capability bounding set (pam_jail.c)."""
    allow = os.environ.get(ENV.allow_user_namespaces) == "true"
    err = ctypes.create_string_buffer(512)
    if ctypes.CDLL(PATHS.jail_lib).soperator_restrict_sessions(int(allow), err, len(err)) != 0:
        raise NodeError(f"cannot restrict login sessions: {err.value.decode()}")
    log("login sessions: in the jail's own mount namespace, no CAP_SYS_ADMIN or CAP_SYS_CHROOT, no_new_privs"
        + ("" if allow else ", no user namespaces"))


def mask_session_proc() -> None:
    """The login sessions' own procfs gets the runtime's masks (read-only /proc/sys and the rest,
    proc_mask.c), as job steps' does: root in the jail must not write kernel.core_pattern."""
    err = ctypes.create_string_buffer(512)
    if ctypes.CDLL(PATHS.jail_lib).soperator_mask_proc(f"{JAIL}/proc".encode(), err, len(err)) != 0:
        raise NodeError(f"cannot mask the login sessions' /proc: {err.value.decode()}")


def limit_user_processes() -> None:
    """RLIMIT_NPROC for sshd and what it starts. The kernel counts a user's processes and checks the
    limit only for callers without CAP_SYS_ADMIN/CAP_SYS_RESOURCE: sshd (root) is not held back, a
    session is once sshd has switched to its user. Kubernetes has no per-pod PID limit (only the
    kubelet's podPidsLimit), so this is what stops one user's fork bomb on a shared login node."""
    limit = int(os.environ.get(ENV.max_user_processes, "0"))
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        log(f"login sessions: at most {limit} processes per user")


def install_pam_service() -> None:
    """sshd's PAM stack from the ConfigMap (pam_sshd.j2) over the image's Debian one."""
    if not os.path.exists(PATHS.pam_sshd_given):
        raise NodeError(f"sshd's PAM service not mounted at {PATHS.pam_sshd_given}")
    shutil.copyfile(PATHS.pam_sshd_given, PATHS.pam_sshd + ".new")
    os.chmod(PATHS.pam_sshd + ".new", 0o644)
    os.replace(PATHS.pam_sshd + ".new", PATHS.pam_sshd)


def ready_session_cgroups() -> bool:
    """One cgroup per ssh user (spec.login.sessionLimits); whether sessions are limited. After the
    jail's bind of /sys: the jail keeps a read-only view, so no session can leave its cgroup or raise
    its limits."""
    if os.environ.get(ENV.session_limits) != "true":
        return False
    try:
        log(f"login sessions' limits: {session_limits.ready(os.environ.get(ENV.node_name, '?'))}")
    except CgroupError as exc:
        raise NodeError(f"{CGROUPS_UNAVAILABLE}{exc}") from exc
    return True


def worker(sup: Supervisor) -> None:
    require_jail()
    sticky_shm()
    log(clear_job_dirs())
    os.makedirs(PATHS.worker_spool, exist_ok=True)
    os.makedirs(os.path.dirname(PATHS.slurmd_log), exist_ok=True)
    # Job users are the jail's users: slurmstepd resolves them before it enters the jail.
    log(f"accounts from the jail: {', '.join(use_jail_accounts(JAIL))}")
    if os.environ.get(ENV.slurm_cgroups) == "true":
        # Before /sys goes into the jail: the jail's bind must carry the writable mount.
        try:
            log(prepare_slurm_cgroups(os.environ.get(ENV.node_name, "?")))
        except CgroupError as exc:
            raise NodeError(f"{CGROUPS_UNAVAILABLE}{exc}") from exc
    start_munged(sup)
    # slurmd keeps the fetched configuration under its spool and links /run/slurm/conf to it: job
    # steps and the Slurm commands in the jail read it there.
    os.makedirs(PATHS.configless_dir, exist_ok=True)
    # slurmd and slurmstepd resolve job users here, and the step again in the jail (spec.identity).
    directory = start_sssd(sup)
    log(f"bound into the jail: {', '.join(bind_into_jail(JAIL, WORKER))}")
    if directory:
        log(f"directory users in the jail: {', '.join(share_with_jail(JAIL))}")
    enable_containers()
    start_image_cache(sup)
    name_health_check()
    name, conf_server = socket.gethostname(), os.environ[ENV.conf_server]
    wait_for_names([conf_server.rsplit(":", 1)[0]], START_WAIT, stop=lambda: sup.stopping)
    # This container's identity in Slurm (the node's InstanceId): only it may delete the record.
    instance = f"{os.environ.get(ENV.pod_uid, 'pod')}/{time.time_ns()}"
    log(take_over(name, instance, conf_server, START_WAIT, stop=lambda: sup.stopping))
    sup.follow("slurmd-log", PATHS.slurmd_log)
    # `-b`: its boot time is slurmd's start, this container's, not the host kernel's (kept across
    # reconfigure); a powered-up CLOUD node's registration counts only after Slurm asked for it.
    argv = ["slurmd", "-D", "-b", "--instance-id", instance, "--conf-server", conf_server]
    if os.environ.get(ENV.cloud_node) == "true":
        # A CLOUD record of slurm.conf, under the pod's name: it outlives the pod (the operator powers
        # it down once the pod is gone), so there is nothing to forget.
        sup.start("slurmd", argv + ["-N", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return
    # A dynamic node: it registers itself under the pod's name, with what the spec gives the pod, at
    # its place in the topology when the cluster has one.
    place = wait_for_place(os.environ[ENV.place_file], PLACE_WAIT, stop=lambda: sup.stopping) \
        if os.environ.get(ENV.place_file) else ""
    sup.start("slurmd", argv + ["-Z", "--conf", registration_conf(os.environ[ENV.slurmd_conf], place)],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, after_stop=lambda: forget_node(name, instance))


def name_health_check() -> None:
    """Where slurmd's HealthCheckProgram (health_check.py) finds the jail program the spec names."""
    program = os.environ.get(ENV.health_check_program)
    if program:
        os.makedirs(os.path.dirname(PATHS.health_check_program), exist_ok=True)
        with open(PATHS.health_check_program, "w", encoding="utf-8") as fh:
            fh.write(program + "\n")
        log(f"health check: {program}, in the jail")
    elif os.path.exists(PATHS.health_check_program):
        os.unlink(PATHS.health_check_program)


def enable_containers() -> None:
    """On a node set with Pyxis (the pod carries its enroot.conf): Pyxis's and enroot's node-local
    directories and that enroot.conf go into the jail, and job steps may create user namespaces.
    Root's and closed to users: the chroot plugin makes each step user's own directories in them
    (listed in PATHS.user_dirs_file, on the node's root), so no user can plant another's."""
    conf = os.environ.get(ENV.enroot_conf)
    if not conf:
        return
    for path in (*CONTAINER_RUNTIME, PATHS.image_cache):
        os.makedirs(path, exist_ok=True)
        os.chown(path, 0, 0)
        os.chmod(path, 0o755)
    os.makedirs(os.path.dirname(PATHS.enroot_conf), mode=0o755, exist_ok=True)
    with open(PATHS.user_dirs_file, "w") as fh:
        fh.write("".join(f"{template}\n" for template in USER_DIRS))
    with open(PATHS.enroot_conf, "w") as fh:
        fh.write(conf)
    os.chmod(PATHS.enroot_conf, 0o644)
    bound = bind_into_jail(JAIL, CONTAINERS)
    if bind(PATHS.enroot_conf, JAIL + PATHS.jail_enroot_conf, is_dir=False, read_only=True):
        bound.append(PATHS.jail_enroot_conf)
    open(PATHS.userns_mark, "w").close()
    log(f"container jobs (Pyxis): bound into the jail: {', '.join(bound)}; job steps may create user namespaces; "
        f"each step's user gets its own {', '.join(USER_DIRS)}; "
        f"{open_fuse_to_users(node=os.environ.get(ENV.node_name, '?'))}")


def start_image_cache(sup: Supervisor) -> None:
    """On a Pyxis node set with an image cache (pyxis.imageCache): its daemon (image_cache.py), started
    again should it exit (no job depends on it while it runs)."""
    if os.environ.get(ENV.image_cache_bytes):
        sup.start_restartable("image-cache", [sys.executable, "-P", "-m", "soperator_node", "image-cache"])


def open_fuse_to_users(device: str = FUSE_DEVICE, node: str = "?") -> str:
    """/dev/fuse, when the pod was given it (spec.plugStack.pyxis.mountImages), for the users whose
    squashfuse mounts their images. Outside a user namespace the runtime makes the container's own node
    with the node's mode, which is root's alone where no udev rule widened it (0600 on the test host;
    distributions' rule makes it 0666, FUSE's own checks keep users apart): it is opened here. In a user
    namespace (hostUsers: false) the runtime binds the node's own device, which nobody in the pod owns,
    so root and users alike open it only if the node made it 0666: otherwise no image can be mounted on
    this worker, and it refuses to start, naming the node (the Ready condition carries it). The /dev of
    the jail is a bind of this container's."""
    if not os.path.exists(device):
        return f"no {device}"
    if os.stat(device).st_dev == os.stat(os.path.dirname(device)).st_dev:
        os.chmod(device, 0o666)
        return f"{device} open to users (squashfuse)"
    mode = stat.S_IMODE(os.stat(device).st_mode)
    refusal = closed_fuse(node, device, mode)
    if refusal:
        raise NodeError(f"{FUSE_UNAVAILABLE}{refusal}")
    return f"{device} is the node's own, open to users (mode {mode:04o})"


def closed_fuse(node: str, device: str, mode: int) -> str | None:
    """Why a user-namespaced worker cannot use the node's own /dev/fuse of this mode, if it cannot: the
    pod's ids are neither its owner nor its group."""
    if mode & 0o006 == 0o006:
        return None
    return (f"node {node}: its {device} is mode {mode:04o}, bound into this worker (a user namespace, or a "
            "rootless runtime), which can neither open nor change it, so no container image can be mounted here "
            "(plugStack.pyxis.mountImages): make it 0666 on the node, as udev's default rule does")


def forget_node(name: str, instance: str) -> None:
    """A worker pod that goes away takes its node record along (a dynamic node's record otherwise
    stays, DOWN), so Slurm lists the live workers only. Slurm refuses while a job still runs there.
    Only while the record is still this container's (fresh_boot.forget_refusal)."""
    node, failure = record(name)
    refused = forget_refusal(node, failure, instance)
    if refused:
        log(f"node {name} left in Slurm: {refused}")
        return
    try:
        proc = scontrol("delete", f"NodeName={name}")
    except subprocess.TimeoutExpired:
        log(f"node {name} not deleted from Slurm: scontrol timed out")
        return
    log(f"node {name} deleted from Slurm" if proc.returncode == 0 else
        f"node {name} not deleted from Slurm: {proc.stderr.strip() or proc.returncode}")


def install_root_keys() -> None:
    """Root's keys from the ConfigMap, copied where sshd's StrictModes accepts them: kubelet mounts a
    ConfigMap volume in a world-writable directory. The pod restarts when they change (config hash)."""
    os.makedirs(os.path.dirname(PATHS.root_authorized_keys), mode=0o755, exist_ok=True)
    os.chmod(os.path.dirname(PATHS.root_authorized_keys), 0o755)
    if not os.path.exists(PATHS.root_keys_given):
        return
    with open(PATHS.root_keys_given, "rb") as src:
        keys = src.read()
    write_private(PATHS.root_authorized_keys, keys)


def login(sup: Supervisor) -> None:
    require_jail()
    sticky_shm()
    log(f"accounts from the jail: {', '.join(use_jail_accounts(JAIL))}")
    start_munged(sup)
    # sackd fetches the configuration into /run/slurm/conf and keeps it current: the jail's Slurm
    # commands read it there (bound in below). It runs as SlurmUser, in the foreground (-D), where it
    # takes a reconfigure by exec'ing its argv[0] in place: by absolute path (a bare name fails with
    # ENOENT and it goes on with the old files). Not --systemd: there it hands over to a new process
    # and exits, which would end this container.
    os.makedirs(PATHS.configless_dir, exist_ok=True)
    shutil.chown(PATHS.configless_dir, "slurm", "slurm")
    conf_server = os.environ[ENV.conf_server]
    wait_for_names([conf_server.rsplit(":", 1)[0]], START_WAIT, stop=lambda: sup.stopping)
    sackd = sup.start("sackd", ["runuser", "-u", "slurm", "--", shutil.which("sackd") or "sackd", "-D",
                                "--conf-server", conf_server])
    if not wait_for_path(f"{PATHS.configless_dir}/conf/slurm.conf", 180, sackd):
        raise NodeError(f"sackd did not fetch the configuration from {conf_server} (exit code {sackd.poll()})")
    log(f"nosuid,nodev: {', '.join(harden_jail(JAIL))}")
    # sshd looks users and their keys up here, sessions again in the jail (spec.identity).
    directory = start_sssd(sup)
    log(f"bound into the jail: {', '.join(bind_into_jail(JAIL, LOGIN))}")
    if directory:
        log(f"directory users in the jail: {', '.join(share_with_jail(JAIL))}")
    mount_private_proc(JAIL)
    mask_session_proc()  # also over one already there: another read-only layer changes nothing
    limited = ready_session_cgroups()
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    install_root_keys()
    install_pam_service()
    if limited:  # what the PAM step says of each login, in the pod's log (its directory made above)
        sup.follow("session-limits", PATHS.session_limits_log)
    limit_user_processes()
    restrict_sessions()
    sup.start("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", PATHS.sshd_config])


def hold_nodes(sup: Supervisor) -> None:
    start_munged(sup)
    hold()


def release_nodes(sup: Supervisor) -> None:
    start_munged(sup)
    release()


def database(sup: Supervisor) -> None:
    """MariaDB for slurmdbd: its data directory made on first start, its account set every start."""
    log("a new data directory" if prepare_datadir(PATHS.db_data) else "the existing data directory")
    proc = sup.start("mariadbd", server_argv(PATHS.db_data))
    if not wait_for_path(PATHS.db_socket, 120, proc):
        raise NodeError("mariadbd did not create its socket")
    with open(PATHS.db_password) as fh:
        ensure_account(os.environ[ENV.db_name], os.environ[ENV.db_user], fh.read().strip())
    log("database and slurmdbd's account ready")


def slurmdbd(sup: Supervisor) -> None:
    """slurmdbd reads slurmdbd.conf beside $SLURM_CONF, and refuses one whose mode is not exactly 0600
    (0400 too: "should be 600", found on the real node)."""
    start_munged(sup)
    install_key(PATHS.slurmdbd_conf_given, PATHS.slurmdbd_conf, "slurm", 0o600)
    sup.start("slurmdbd", ["slurmdbd", "-D"], env={**os.environ, "SLURM_CONF": PATHS.slurmdbd_slurm_conf})


ROLES = {layout.CONTROLLER: controller, layout.WORKER: worker, layout.LOGIN: login, layout.DATABASE: database,
         layout.SLURMDBD: slurmdbd}
# Roles that finish: the populate Job's steps around an overwrite.
ONE_SHOT = {layout.HOLD_NODES: hold_nodes, layout.RELEASE_NODES: release_nodes}
