"""The layout contract: what the operator's objects and the node containers must agree on, written once.

Render writes these names, labels, ports and paths into the objects; reconcile finds its children by
them; the node entrypoints read the same paths and serve the same ports inside the pods. Standard
library only: the node images carry this package as `soperator_node`, without the operator (the node
code imports it relatively, everything else as soperator.node.layout). tests/unit/test_layout_contract.py
fails on a second literal of a port, path or label key anywhere under soperator/.
"""
from __future__ import annotations

# Components: the app.kubernetes.io/component label, the object name's suffix and, for a node
# container, its role ($SOPERATOR_COMPONENT picks the entrypoint in roles.py). A node set may not be
# named like one with a StatefulSet or Job of its own (api/spec.py): the names would collide.
CONTROLLER = "controller"
WORKER = "worker"
LOGIN = "login"
SLURMDBD = "slurmdbd"
DATABASE = "database"
POPULATE_JAIL = "populate-jail"
# The populate Job's Slurm steps around an overwrite: roles of the node code, containers of the Job.
HOLD_NODES = "hold-nodes"
RELEASE_NODES = "release-nodes"
# Components of objects that run no Slurm daemon (their label only).
MUNGE = "munge"
SLURM_CONFIGS = "slurm-configs"
NETWORK_POLICY = "network-policy"

# Labels every child carries: reconcile lists a cluster's children by the selector ones, and the
# operator hears of its children's changes by MANAGED_BY_LABEL: OPERATOR (handlers.py).
COMPONENT_LABEL = "app.kubernetes.io/component"
INSTANCE_LABEL = "app.kubernetes.io/instance"
NAME_LABEL = "app.kubernetes.io/name"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PART_OF_LABEL = "app.kubernetes.io/part-of"
VERSION_LABEL = "app.kubernetes.io/version"
APP_NAME = "slurm"
OPERATOR = "soperator"


def member_name(stateful_set: str, ordinal: int) -> str:
    """A StatefulSet's pod; for a worker, also its Slurm node's name."""
    return f"{stateful_set}-{ordinal}"


def ordinal_of(stateful_set: str, name: str) -> int | None:
    """The ordinal of a member of this StatefulSet; None for any other name."""
    head, _, ordinal = name.rpartition("-")
    return int(ordinal) if head == stateful_set and ordinal.isdigit() else None


# On a worker StatefulSet and its pods: the node set they belong to.
NODE_SET_LABEL = "slurm.soperator.dev/node-set"
# Set by Kubernetes, read by reconcile: a StatefulSet pod's template revision, a Job pod's Job.
REVISION_LABEL = "controller-revision-hash"
# The Slurm release an object was rendered for; on a pod, the release its daemons run. A pod without
# it was made before releases were labelled: by an operator that ran only Slurm 24.11.
SLURM_RELEASE_LABEL = "slurm.soperator.dev/slurm-release"
UNLABELLED_RELEASE = "24.11"
# On the operator's pods (the slurm-operator chart sets it): the only pods a cluster's controller
# ingress policy lets reach slurmrestd.
REST_CLIENT_LABEL = "slurm.soperator.dev/slurm-rest-client"
JOB_NAME_LABEL = "job-name"
# On a worker pod whose Slurm node can run no job (drained or down): the workers' disruption budget
# leaves it out, so an eviction may take it (soperator/reconcile/evictions.py).
EVICTABLE_LABEL = "slurm.soperator.dev/evictable"
# /dev/fuse, which the operator chart's device plugin offers (soperator/fuse_device): the workers of
# node sets with Pyxis ask for one when images are mounted (spec.plugStack.pyxis.mountImages).
FUSE_RESOURCE = "soperator.dev/fuse"
FUSE_DEVICE = "/dev/fuse"  # the same path on the node and in the container

# The image cache's imports (image_cache.py): so many at once, each one's mksquashfs caches held to so
# many MiB. Left to itself mksquashfs sizes them from the node's memory (a quarter: 6,026 MB in a 512
# MiB container here), not the pod's; a worker's memory limit is its jobs' RealMemory and little more,
# so an import could take the pod to its limit, where the OOM killer may pick a job.
IMAGE_IMPORTS_AT_ONCE = 2
IMAGE_IMPORT_SQUASH_MIB = 128

# Annotations reconcile reads back from what render wrote.
# A digest of the files a pod reads once at start: a change rolls the pods (login's sshd_config).
CONFIG_HASH_ANNOTATION = "slurm.soperator.dev/config-hash"
# On the populate Job: the overwrite setting it was made for (another one makes a new Job), and
# whether it holds the Slurm nodes while it runs.
OVERWRITE_ANNOTATION = "slurm.soperator.dev/overwrite"
HOLD_ANNOTATION = "slurm.soperator.dev/hold-nodes"
# On the controller pod: the digest of the Slurm configs it was last told about (reconcile/config_nudge.py).
CONFIG_SEEN_ANNOTATION = "slurm.soperator.dev/configs-seen"
# On a Kubernetes node the operator cordoned to move a worker off it (reconcile/kube_nodes.py): the
# condition it did it for; only a cordon with it is the operator's to lift.
CORDONED_ANNOTATION = "slurm.soperator.dev/cordoned-for"
# On a worker pod of a cluster with spec.topology, once it is bound: its place in Slurm's topology, from
# its Kubernetes node's labels (reconcile/topology.py). A dynamic node reads it through the downward
# API (PATHS.place_file) and registers there, so no job lands on it before it is placed.
PLACE_ANNOTATION = "slurm.soperator.dev/topology"
PLACEMENT_VOLUME = "placement"
# On the pod templates of a cluster with spec.identity: a digest of sssd.conf, which SSSD reads once.
IDENTITY_HASH_ANNOTATION = "slurm.soperator.dev/identity-hash"
# On every object the operator applies: a digest of the object as rendered (reconcile/apply.py), so a
# field it no longer renders makes it apply again.
APPLIED_DIGEST_ANNOTATION = "slurm.soperator.dev/applied-digest"


class NAMES:
    """Suffixes of the objects' names (`<cluster>-<suffix>`) besides the components' own: changing one
    orphans the live object of that name and makes a new one (a new key, for a Secret)."""

    munge_key = "munge-key"
    jwt_key = "jwt-key"
    ssh_host_keys = "ssh-host-keys"
    db_password = "db-password"
    slurmdbd_conf = "slurmdbd-conf"  # then `-<digest>`: one immutable Secret per content
    slurm_configs = SLURM_CONFIGS
    sshd_config = "sshd-config"
    identity = "identity"  # sssd.conf, rendered from spec.identity
    rest = "rest"
    login_headless = "login-headless"
    database_ingress = "database-ingress"
    node_egress = "node-egress"
    controller_ingress = "controller-ingress"
    jail = "jail"  # the jail's PVC, unless the spec names one


class PORTS:
    """What each daemon listens on: Services and probes point at it, the config files tell the daemons."""

    slurmctld = 6817
    slurmd = 6818
    slurmdbd = 6819
    slurmrestd = 6820
    ssh = 22
    database = 3306  # MariaDB's (and MySQL's) own default, also an external database's default


# How a worker or login node that cannot ready its cgroups begins its termination message: the operator
# turns such messages into the WorkersReady or LoginReady condition's reason (reconcile/ready_condition.py).
CGROUPS_UNAVAILABLE = "cgroups unavailable: "
# Likewise a user-namespaced worker that is to mount images through a /dev/fuse its node keeps closed.
FUSE_UNAVAILABLE = "FUSE unavailable: "
# Each such beginning, and the condition's reason for it.
NODE_REFUSALS = {CGROUPS_UNAVAILABLE: "CgroupsUnavailable", FUSE_UNAVAILABLE: "FuseUnavailable"}


class ENV:
    """The environment render gives a node container and its entrypoint reads (roles.py, populate.py)."""

    component = "SOPERATOR_COMPONENT"  # which role the entrypoint runs
    jail = "SOPERATOR_JAIL"
    jail_source = "SOPERATOR_JAIL_SOURCE"  # set by the populate-jail image itself
    conf_server = "SOPERATOR_CONF_SERVER"  # slurmctld's host:port, for configless slurmd and sackd
    slurmd_conf = "SOPERATOR_SLURMD_CONF"  # a dynamic node's --conf: its node set's resources
    # "true" on an autoscaling node set: the node is a CLOUD record of slurm.conf, not a dynamic one.
    cloud_node = "SOPERATOR_CLOUD_NODE"
    place_file = "SOPERATOR_PLACE_FILE"  # where the pod's PLACE_ANNOTATION shows (a topology's dynamic nodes)
    pod_uid = "SOPERATOR_POD_UID"  # tells a restarted container from a new pod (fresh_boot.py)
    health_check_program = "SOPERATOR_HEALTH_CHECK_PROGRAM"
    # "true" when slurm.conf names a plugin that works through cgroups: the worker readies its cgroups.
    slurm_cgroups = "SOPERATOR_SLURM_CGROUPS"
    node_name = "SOPERATOR_NODE_NAME"  # the Kubernetes node the pod runs on, for messages
    enroot_conf = "SOPERATOR_ENROOT_CONF"
    # The node set's image cache limit in bytes (pyxis.imageCache.size); unset: no cache.
    image_cache_bytes = "SOPERATOR_IMAGE_CACHE_BYTES"
    # mksquashfs's options for the image cache's imports: the node set's, their caches bounded.
    image_import_squash_options = "SOPERATOR_IMAGE_IMPORT_SQUASH_OPTIONS"
    allow_user_namespaces = "SOPERATOR_ALLOW_USER_NAMESPACES"
    max_user_processes = "SOPERATOR_MAX_USER_PROCESSES"
    # "true" when spec.login.sessionLimits sets a limit: the login node readies a cgroup per user.
    session_limits = "SOPERATOR_SESSION_LIMITS"
    populate_overwrite = "SOPERATOR_POPULATE_OVERWRITE"
    populate_keep = "SOPERATOR_POPULATE_KEEP"
    db_name = "SOPERATOR_DB_NAME"
    db_user = "SOPERATOR_DB_USER"


# File names in the key Secrets and the sshd ConfigMap: their keys, and so the files in the mounted
# directories below.
MUNGE_KEY_FILE = "munge.key"
JWT_KEY_FILE = "jwt_hs256.key"
DB_PASSWORD_FILE = "password"
SLURMDBD_CONF_FILE = "slurmdbd.conf"
SSHD_CONFIG_FILE = "sshd_config"
PAM_SSHD_FILE = "pam_sshd"
ROOT_KEYS_FILE = "root_authorized_keys"
SSSD_CONF_FILE = "sssd.conf"
# spec.identity's Secrets: the CA's, and the bind one's (the keys of a kubernetes.io/basic-auth Secret).
IDENTITY_CA_FILE = "ca.crt"
BIND_DN_FILE = "username"
BIND_PASSWORD_FILE = "password"
# One Secret file pair each (ssh_host_<type>_key, .pub); sshd_config names them in this order.
SSH_HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")


class PATHS:
    """Paths inside the node pods. Given: where render mounts a Secret or ConfigMap for the entrypoint
    to copy from. A path here is also the same path inside the jail where mounts.py binds it there."""

    # The jail (the shared root filesystem of job steps and login sessions) on the nodes; in the
    # populate Job's pod, and the root filesystem that Job copies into it (its image's).
    jail = "/mnt/jail"
    populate_target = "/jail"
    jail_source = "/jail-rootfs"
    # Relative to the jail: written last by a fill, so a node never starts on a half-filled jail.
    populated = ".soperator/populated"

    # Slurm. The controller reads slurm.conf from the ConfigMap; workers and login nodes fetch it
    # (configless) into configless_dir, bound into the jail so the jail's commands find it.
    slurm_config_dir = "/etc/slurm"
    slurm_conf = f"{slurm_config_dir}/slurm.conf"
    configless_dir = "/run/slurm"
    controller_spool = "/var/spool/slurmctld"
    worker_spool = "/var/spool/slurmd"
    # slurmd's configless copy (/run/slurm/conf links to it): slurmstepd loads plugstack.conf from it
    # before any SPANK plugin runs, so the jail sees it read-only.
    worker_conf_cache = f"{worker_spool}/conf-cache"
    # A file, not /dev/stderr: slurmstepd logs there too and has no stderr of its own.
    slurmd_log = "/var/log/slurm/slurmd.log"
    # slurmdbd reads slurmdbd.conf beside $SLURM_CONF, and refuses one not owned by it with mode 0600:
    # the entrypoint copies the given one here (it also holds slurmdbd's pid file).
    slurmdbd_conf_dir = "/etc/soperator/slurmdbd"
    slurmdbd_conf_given = f"{slurmdbd_conf_dir}/{SLURMDBD_CONF_FILE}"
    slurmdbd_dir = "/run/slurmdbd"
    slurmdbd_conf = f"{slurmdbd_dir}/{SLURMDBD_CONF_FILE}"
    slurmdbd_slurm_conf = f"{slurmdbd_dir}/slurm.conf"

    # Keys: given read-only by their Secrets, copied where their daemon reads them, owned by it.
    munge_key_dir = "/etc/soperator/munge"
    munge_key_given = f"{munge_key_dir}/{MUNGE_KEY_FILE}"
    munge_key = "/etc/munge/munge.key"  # Debian's package bakes its own into every image: replaced
    munge_run_dir = "/run/munge"  # bound into the jail: job steps and Slurm commands talk to munged
    munge_socket = f"{munge_run_dir}/munge.socket.2"
    jwt_key_dir = "/etc/soperator/jwt"
    jwt_key_given = f"{jwt_key_dir}/{JWT_KEY_FILE}"
    placement_dir = "/etc/soperator/placement"  # the downward API's PLACE_ANNOTATION, as a file
    place_file = f"{placement_dir}/place"
    # Owned by SlurmUser and readable by it only: slurmctld checks slurmrestd callers' tokens with it.
    jwt_key = f"/run/slurmctld-jwt/{JWT_KEY_FILE}"

    # Login nodes' sshd.
    ssh_host_keys = "/etc/ssh/keys"
    sshd_config_dir = "/etc/ssh/soperator"
    sshd_config = f"{sshd_config_dir}/{SSHD_CONFIG_FILE}"
    root_keys_given = f"{sshd_config_dir}/{ROOT_KEYS_FILE}"
    # sshd's PAM service (pam_sshd.j2), installed over the image's Debian stack at start.
    pam_sshd_given = f"{sshd_config_dir}/{PAM_SSHD_FILE}"
    pam_sshd = "/etc/pam.d/sshd"
    # Root's keys are copied here: kubelet makes a ConfigMap volume's directory world-writable
    # (0777), and sshd's StrictModes refuses keys under it.
    root_authorized_keys = f"/run/soperator/{ROOT_KEYS_FILE}"

    # The images' own code: the jail library and the SPANK plugin built from it (the directory is
    # bound into the jail, read-only), and slurmd's HealthCheckProgram on workers, which runs
    # spec.healthCheck.program in the jail: the worker writes that program's path to
    # health_check_program first (slurmd passes no arguments).
    lib_dir = "/opt/soperator/lib"
    jail_lib = f"{lib_dir}/libsoperator_jail.so"
    chroot_plugin = f"{lib_dir}/spank_chroot.so"
    pam_jail_module = f"{lib_dir}/pam_soperator_jail.so"  # login sessions into the jail (pam_sshd.j2)
    health_check = "/opt/soperator/bin/health-check"
    # pam_exec's program on login nodes: puts a session into its user's cgroup (session_limits.py).
    session_limits = "/opt/soperator/bin/session-limits"
    # What it refused, and why: copied into the pod's log (sshd's own stderr is closed to it).
    session_limits_log = "/run/soperator/session-limits.log"
    health_check_program = "/run/soperator/health-check-program"
    # Read by the chroot plugin before a step enters the jail (jail.h: SOPERATOR_NODE_USERNS_MARK).
    userns_mark = "/run/soperator/allow-user-namespaces"

    # Pyxis and enroot, on workers of a node set with Pyxis: node-local (the pod's volume), bound into
    # the jail at the same paths. Each step user's own directories in them are listed in
    # user_dirs_file for the chroot plugin (spank_chroot/user_dirs.h); enroot.conf.j2 names them too.
    pyxis_plugin = "/usr/local/lib/slurm/spank_pyxis.so"
    pyxis_runtime = "/run/pyxis"
    enroot_runtime = "/run/enroot"
    enroot_credentials = "/etc/soperator/enroot"
    user_dirs_file = "/run/soperator/user-dirs"
    # The node set's enroot.conf, from the pod's environment, bound over the jail's (enroot reads it there).
    enroot_conf = "/run/soperator/enroot.conf"
    jail_enroot_conf = "/etc/enroot/enroot.conf"
    # The image cache (image_cache.py): root's images in the node-local enroot volume (bound read-only
    # into the jail, a mount of their own), and the socket Pyxis's importer asks it through, both seen
    # in the jail at these paths. The importer itself comes with the node image, bound read-only into
    # the jail (plugstack.conf names it).
    image_cache = f"{enroot_runtime}/images"
    image_cache_work = f"{enroot_runtime}/.image-work"  # root's alone: imports in progress
    image_cache_socket = f"{enroot_runtime}/image-cache.sock"
    pyxis_importer_dir = "/opt/soperator/pyxis"
    pyxis_importer = f"{pyxis_importer_dir}/importer"

    # spec.identity: SSSD on the controller, worker and login nodes. The operator's sssd.conf (no
    # password in it), the bind Secret and the CA are given here; the entrypoint writes sssd_conf from
    # them (root's, 0600: sssd refuses it otherwise). SSSD's sockets and memory cache in sss_state are
    # bound into the jail (libnss_sss there looks for them at these fixed paths); its db there is the
    # cache a directory outage is survived with, an emptyDir that outlives the container.
    identity_dir = "/etc/soperator/identity"
    identity_conf_given = f"{identity_dir}/conf/{SSSD_CONF_FILE}"
    identity_bind_dir = f"{identity_dir}/bind"
    identity_ca = f"{identity_dir}/ca/{IDENTITY_CA_FILE}"
    sssd_conf = f"/etc/sssd/{SSSD_CONF_FILE}"
    sss_state = "/var/lib/sss"
    sss_pipes = f"{sss_state}/pipes"
    sss_memory_cache = f"{sss_state}/mc"
    sss_authorized_keys = "/usr/bin/sss_ssh_authorizedkeys"
    # sshd's AuthorizedKeysCommand with spec.identity (directory_keys.py).
    directory_keys = "/opt/soperator/bin/directory-keys"

    # The accounting database's pod.
    db_data = "/var/lib/mysql"
    db_socket = "/run/mysqld/mysqld.sock"
    db_password_dir = "/etc/soperator/db"
    db_password = f"{db_password_dir}/{DB_PASSWORD_FILE}"

    # Workers' Memory emptyDir (MPI, NCCL); the entrypoints give it the sticky bit.
    shm = "/dev/shm"
    # Each job's private /tmp and /dev/shm on a worker (spank_chroot/job_dirs.c): <base>/<job id>,
    # bound over the jail's in the job's steps. The bases are root's and out of the jail's sight: the
    # tmp one a disk emptyDir of its own, the shm one inside the Memory emptyDir.
    job_tmp = "/var/lib/soperator/job-tmp"
    job_shm = f"{shm}/.soperator-jobs"
    # Where the kubelet keeps a node container's termination message: not /dev/termination-log, since
    # /dev goes into the jail and the kubelet makes that host file writable by anyone (security #5).
    termination_log = "/run/termination-log"
