"""slurmd: a StatefulSet per node set (one pod per Slurm node) and the workers' headless Service."""
from __future__ import annotations

import math

from soperator.api.cluster import SlurmCluster
from soperator.api.fields import quantity_value
from soperator.api.slurm_config import uses_cgroups
from soperator.api.spec import GPU_RESOURCE, NodeSetSpec
from soperator.node.layout import (ENV, FUSE_RESOURCE, IMAGE_IMPORT_SQUASH_MIB, IMAGE_IMPORTS_AT_ONCE, PATHS,
                                   PLACE_ANNOTATION, PLACEMENT_VOLUME, PORTS, WORKER)
from soperator.render.common import Obj, object_name, resources, slurm_daemon_probes
from soperator.render.configs import conf_server, enroot_conf, worker_node_conf
from soperator.render.nodes import (NODE_CAPABILITIES, headless_service, jail_mount, jail_mounts,
                                    jail_volumes, node_pod, node_security_context, slurm_mounts, slurm_volumes,
                                    stateful_set)
from soperator.render.identity import identity_annotations, identity_mounts, identity_volumes
from soperator.render.seccomp_profile import pyxis_worker_profile_path

# slurmd, munged and each step's slurmstepd (charged to the pod while Slurm's cgroups are off), in a
# worker's default memory limit.
DAEMONS_MIB = 512
# An image cache import beside its mksquashfs (enroot's bash, curl, the decompressor, tar): added, for
# each import that may run at once, where the node set has a cache.
IMPORT_TOOLS_MIB = 64
# mksquashfs's options where enroot.conf names none (enroot 4.1).
ENROOT_SQUASH_DEFAULT = "-comp lzo -noD -exit-on-error"
LOCAL_VOLUME = "local"
AFFINITY_CAPABILITY = "SYS_NICE"
IMPORT_CAPABILITY = "MKNOD"
ROOT_MAP_CAPABILITY = "SETFCAP"


def node_set_stateful_set_name(cluster: SlurmCluster, node_set: NodeSetSpec) -> str:
    """Also the prefix of its pods' names, which are its Slurm nodes' names."""
    return object_name(cluster, node_set.name)


def local_volume(node_set: NodeSetSpec) -> tuple[list[Obj], list[Obj]]:
    """(mounts, volumeClaimTemplates) of the node set's per-worker volume, if it has one."""
    local = node_set.local_volume
    if local is None:
        return [], []
    claim: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": local.size}}}
    if local.storage_class_name:
        claim["storageClassName"] = local.storage_class_name
    return [jail_mount(LOCAL_VOLUME, local.mount_path)], [{"metadata": {"name": LOCAL_VOLUME}, "spec": claim}]


def _pyxis(cluster: SlurmCluster, node_set: NodeSetSpec) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """(env, mounts, volumes) a worker of a node set with Pyxis adds: its enroot.conf, the node-local
    volume enroot keeps containers in, and the registry credentials if the spec names a Secret."""
    pyxis = node_set.pyxis
    if not pyxis.enabled:
        return [], [], []
    env = [{"name": ENV.enroot_conf, "value": enroot_conf(cluster, node_set)}]
    if pyxis.image_cache.enabled:
        env.append({"name": ENV.image_cache_bytes, "value": str(pyxis.image_cache_bytes)})
        env.append({"name": ENV.image_import_squash_options, "value": import_squash_options(node_set)})
    mounts = [{"name": "enroot", "mountPath": PATHS.enroot_runtime}]
    volumes = [{"name": "enroot", "emptyDir": {"sizeLimit": pyxis.storage_size}}]
    if pyxis.registry_credentials_secret:
        mounts.append({"name": "enroot-credentials", "mountPath": PATHS.enroot_credentials, "readOnly": True})
        volumes.append({"name": "enroot-credentials", "secret": {
            "secretName": pyxis.registry_credentials_secret, "defaultMode": 0o444,
            "items": [{"key": ".credentials", "path": ".credentials"}]}})
    return env, mounts, volumes


def _mounts_images(cluster: SlurmCluster, node_set: NodeSetSpec) -> bool:
    """Pyxis on this node set mounts images (plugStack.pyxis.mountImages)."""
    return node_set.pyxis.enabled and cluster.spec.plug_stack.pyxis.mount_images


def _fuse_limit(cluster: SlurmCluster, node_set: NodeSetSpec) -> dict[str, str]:
    """Pyxis mounts images: its workers get /dev/fuse, and only they."""
    return {FUSE_RESOURCE: "1"} if _mounts_images(cluster, node_set) else {}


def _health_check_env(cluster: SlurmCluster) -> list[Obj]:
    """The jail program slurmd's HealthCheckProgram runs (soperator/node/health_check.py): slurmd gives
    it no arguments, so the pod tells the node which one."""
    health = cluster.spec.health_check
    return [{"name": ENV.health_check_program, "value": health.program}] if health.interval > 0 else []


def _cgroups_env(cluster: SlurmCluster) -> list[Obj]:
    """Where slurm.conf names a plugin that works through cgroups, the worker readies its own cgroups
    for slurmd (soperator/node/cgroups.py)."""
    return [{"name": ENV.slurm_cgroups, "value": "true"}] if uses_cgroups(cluster.spec.slurm_config) else []


def _node_name_env(cluster: SlurmCluster, node_set: NodeSetSpec) -> list[Obj]:
    """The Kubernetes node, for the worker to name when it cannot ready its cgroups, or, in a user
    namespace, when it cannot mount images: the node's /dev/fuse is closed to it (roles.open_fuse_to_users)."""
    mounts = _mounts_images(cluster, node_set) and not node_set.host_users
    if not (mounts or uses_cgroups(cluster.spec.slurm_config)):
        return []
    return [{"name": ENV.node_name, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]


def import_squash_options(node_set: NodeSetSpec) -> str:
    """mksquashfs's options for the image cache's imports: the node set's, with the caches bounded
    (layout.IMAGE_IMPORT_SQUASH_MIB) unless its own options size them already."""
    given = node_set.pyxis.enroot_config.get("ENROOT_SQUASH_OPTIONS", ENROOT_SQUASH_DEFAULT)
    if any(option in ("-mem", "-mem-percent") for option in given.split()):
        return given
    return f"{given} -mem {IMAGE_IMPORT_SQUASH_MIB}M"


def imports_mib(node_set: NodeSetSpec) -> int:
    """What the image cache's imports may use at once (none without a cache)."""
    if not (node_set.pyxis.enabled and node_set.pyxis.image_cache.enabled):
        return 0
    return IMAGE_IMPORTS_AT_ONCE * (IMAGE_IMPORT_SQUASH_MIB + IMPORT_TOOLS_MIB)


def worker_limits(node_set: NodeSetSpec) -> dict[str, str]:
    """The GPUs, and a memory limit where the node set names none: the RealMemory Slurm fills with
    jobs, the pod's /dev/shm (memory too), the daemons beside them and the image cache's imports.
    Without it a worker could take the whole node's memory, other pods' included; with it, the memory
    request defaults to the same, so the scheduler places the pod where that much is free."""
    def mib(quantity: str) -> int:
        return math.ceil(quantity_value(quantity) / 2**20)

    limits = {GPU_RESOURCE: str(node_set.gpus)} if node_set.gpus else {}
    if "memory" not in node_set.resources.limits:
        needed = node_set.real_memory_mib + mib(node_set.shared_memory_size) + DAEMONS_MIB + imports_mib(node_set)
        request = node_set.resources.requests.get("memory")
        limits["memory"] = f"{max(needed, mib(request)) if request is not None else needed}Mi"
    return limits


def worker_security_context(cluster: SlurmCluster, node_set: NodeSetSpec) -> Obj:
    """With task/affinity, slurmstepd (root) binds each task to its CPUs after the task has become the
    job's user: sched_setaffinity on another user's process needs CAP_SYS_NICE (without it every
    non-root step failed "Slurmd could not execve job" and drained its node; measured). Tasks drop it.
    A node set with Pyxis runs under its own seccomp profile (seccomp_profile.py): containerd's
    default refuses the pivot_root that enroot enters every container with, whatever the
    capabilities. Its job steps may create user namespaces (the chroot plugin's filter is lifted on
    these workers only). With an image cache it keeps CAP_MKNOD too (containerd's and Docker's
    default, which we drop elsewhere): the cache's imports (root's) turn an image's whiteouts into
    overlay ones with mknod (measured: "enroot-aufs2ovlfs: failed to set capabilities" without it).
    Tasks still drop it. In a user namespace it also keeps CAP_SETFCAP, over its own namespace, and so
    do root's tasks (spank_chroot/restrict.c): enroot maps root's container to root, which Linux 5.12+
    allows only to a creator holding it (measured: "enroot-nsenter: failed to create user namespace")."""
    binds = "task/affinity" in cluster.spec.slurm_config.task_plugin.split(",")
    pyxis = node_set.pyxis.enabled
    imports = pyxis and node_set.pyxis.image_cache.enabled
    root_map = pyxis and not node_set.host_users
    context = node_security_context(NODE_CAPABILITIES + (AFFINITY_CAPABILITY,) * binds + (IMPORT_CAPABILITY,) * imports
                                    + (ROOT_MAP_CAPABILITY,) * root_map)
    if not node_set.host_users:
        # In a user namespace the kernel mounts no new procfs while the runtime's masks cover /proc, and
        # the jail plugin mounts one for each step and session (and masks it itself). The worker's own
        # root then sees /proc unmasked, with no power over what the masks hid: the node's sysctls,
        # sysrq-trigger and kcore need capabilities in the node's user namespace, or its root's files.
        context["procMount"] = "Unmasked"
    if pyxis:
        profile = node_set.pyxis.seccomp_profile
        context["seccompProfile"] = {"type": "Unconfined"} if profile.type == "Unconfined" else {
            "type": "Localhost", "localhostProfile": profile.localhost_profile or pyxis_worker_profile_path()}
    return context


def _slurm_node_env(node_set: NodeSetSpec) -> list[Obj]:
    """A fixed-size node set's workers register as dynamic nodes with their resources; an autoscaling
    one's are slurm.conf's CLOUD records (render/configs.py), which carry them."""
    if node_set.autoscale:
        return [{"name": ENV.cloud_node, "value": "true"}]
    return [{"name": ENV.slurmd_conf, "value": worker_node_conf(node_set)}]


def _placement(cluster: SlurmCluster, node_set: NodeSetSpec) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """(env, mounts, volumes) of a dynamic node under a topology: the place the operator writes on the
    pod (PLACE_ANNOTATION) as a file, which the kubelet refreshes, for slurmd's registration. A CLOUD
    record has its place set through slurmrestd once its slurmd registered."""
    if cluster.spec.topology is None or node_set.autoscale:
        return [], [], []
    items = [{"path": PATHS.place_file.rsplit("/", 1)[1],
              "fieldRef": {"fieldPath": f"metadata.annotations['{PLACE_ANNOTATION}']"}}]
    return ([{"name": ENV.place_file, "value": PATHS.place_file}],
            [{"name": PLACEMENT_VOLUME, "mountPath": PATHS.placement_dir, "readOnly": True}],
            [{"name": PLACEMENT_VOLUME, "downwardAPI": {"items": items}}])


def worker_stateful_set(cluster: SlurmCluster, node_set: NodeSetSpec, replicas: int) -> Obj:
    spec = cluster.spec
    local_mounts, claim_templates = local_volume(node_set)
    pyxis_env, pyxis_mounts, pyxis_volumes = _pyxis(cluster, node_set)
    place_env, place_mounts, place_volumes = _placement(cluster, node_set)
    container = {
        "name": "slurmd",
        "image": node_set.image or spec.image("worker"),
        "imagePullPolicy": spec.images.pull_policy,
        "env": [{"name": ENV.component, "value": WORKER},
                {"name": ENV.jail, "value": PATHS.jail},
                {"name": ENV.conf_server, "value": conf_server(cluster)},
                *_slurm_node_env(node_set), *place_env,
                # Part of the node's InstanceId in Slurm: which pod (and container) registered it.
                {"name": ENV.pod_uid, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                *pyxis_env, *_health_check_env(cluster), *_cgroups_env(cluster), *_node_name_env(cluster, node_set)],
        "ports": [{"name": "slurmd", "containerPort": PORTS.slurmd, "protocol": "TCP"}],
        "securityContext": worker_security_context(cluster, node_set),
        "volumeMounts": slurm_mounts(configs=False) + jail_mounts(cluster, node_set.sub_mounts) + local_mounts + [
            {"name": "spool", "mountPath": PATHS.worker_spool},
            {"name": "shm", "mountPath": PATHS.shm},
            {"name": "job-tmp", "mountPath": PATHS.job_tmp},
            *pyxis_mounts, *place_mounts, *identity_mounts(cluster),
        ],
        **slurm_daemon_probes(PORTS.slurmd, spec.slurm_version),
        "resources": resources(node_set, {**worker_limits(node_set), **_fuse_limit(cluster, node_set)}),
    }
    volumes = slurm_volumes(cluster, configs=False) + jail_volumes(cluster, node_set.sub_mounts) + [
        {"name": "spool", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": node_set.shared_memory_size}},
        {"name": "job-tmp", "emptyDir": {}},
        *pyxis_volumes, *place_volumes, *identity_volumes(cluster),
    ]
    # Running steps get KillWait to stop before the pod is torn down.
    pod = node_pod(cluster, node_set, container, volumes, grace_seconds=spec.slurm_config.kill_wait + 30)
    if not node_set.host_users:
        pod["hostUsers"] = False
    # No config hash: a Slurm config change reaches slurmd by reconfigure, and scaling is registration.
    # sssd.conf's does: SSSD reads it once.
    return stateful_set(cluster, WORKER, replicas, pod, identity_annotations(cluster), claim_templates,
                        node_set=node_set.name)


def worker_stateful_sets(cluster: SlurmCluster, replicas: dict[str, int]) -> list[Obj]:
    return [worker_stateful_set(cluster, n, replicas[n.name]) for n in cluster.spec.node_sets]


def worker_service(cluster: SlurmCluster) -> Obj:
    """One headless Service for every node set: pods of all of them resolve under one search domain."""
    return headless_service(cluster, WORKER, [{"name": "slurmd", "port": PORTS.slurmd,
                                               "targetPort": PORTS.slurmd, "protocol": "TCP"}])
