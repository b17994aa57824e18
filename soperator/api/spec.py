"""The desired state of one Slurm cluster: the `spec` of a SlurmCluster."""
from __future__ import annotations

import ipaddress
import math
import re
from typing import Annotated, Literal, Optional

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from soperator.api.common import (ApiModel, AtField, ComponentBase, ResourceMap, ResourceRequirements, cel,
                                  refuse_duplicates, unique_rule)
from soperator.api import releases
from soperator.api.containers import Pyxis
from soperator.api.fields import (DNS_LABEL_PATTERN, MAX_SAFE_INTEGER, AnnotationMap, Cidr, DnsLabel, ImageRef, LabelMap,
                                  PositiveQuantity, Quantity, Registry, SecretName, SshPublicKey, quantity_value)
from soperator.api.grammar import GRES_NAME_PATTERN, GresDeviceFiles, GresEntry, SlurmName
from soperator.api.paths import JailHostPath, JailSubMountPath, overlap_rule, overlapping
from soperator.api.slurm_config import ALONE_STATES, CgroupConfig, HealthCheck, NodeSetName, Partition, PlugStack, SlurmConfig
from soperator.api.identity import IdentitySpec, literal_address
from soperator.api.topology import LabelKey, TopologySpec, label_keys
from soperator.node.layout import CONTROLLER, DATABASE, LOGIN, POPULATE_JAIL, PORTS, SLURMDBD


class Images(ApiModel):
    """Each image is `<registry>/<component>:<version>` unless given in full (a digest pins it); for a
    Slurm release other than the operator's default, `<version>-slurm<release>`.
    The default registry, localhost/soperator, names the images `python -m images.build` makes; a
    cluster pulls from the registry its admin sets, never from a public namespace by guess."""

    registry: Registry = "localhost/soperator"
    controller: Optional[ImageRef] = None
    worker: Optional[ImageRef] = None
    login: Optional[ImageRef] = None
    populate_jail: Optional[ImageRef] = None
    database: Optional[ImageRef] = Field(default=None, description="the accounting database (MariaDB)")
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    pull_secrets: list[SecretName] = Field(
        default_factory=list, max_length=16,
        description="Secrets (kubernetes.io/dockerconfigjson) every pod of the cluster pulls its image with")

    def ref(self, component: str, release: str) -> str:
        """An image given in full must carry the release spec.slurmVersion names."""
        given = getattr(self, component.replace("-", "_"))
        return given or f"{self.registry}/{component}:{releases.image_tag(release)}"


class SpoolVolume(ApiModel):
    """Slurmctld's StateSaveLocation. A PVC keeps job state across controller restarts."""

    claim_name: Optional[DnsLabel] = None
    size: PositiveQuantity = "1Gi"
    storage_class_name: Optional[DnsLabel] = None


# Defaults per field (requests, limits), as the CRD's structural defaulting applies them: a spec
# that sets only limits keeps the default requests, in the CLI and on the apiserver alike.
class ControllerResources(ResourceRequirements):
    # A ceiling, so a runaway slurmctld is restarted (its state is on the spool volume) before it
    # starves the node; large clusters raise it.
    requests: ResourceMap = Field(default_factory=lambda: {"cpu": "250m", "memory": "512Mi"})
    limits: ResourceMap = Field(default_factory=lambda: {"memory": "4Gi"})


class LoginResources(ResourceRequirements):
    # Users compile and run tools here: a ceiling keeps one of them from taking the node down.
    requests: ResourceMap = Field(default_factory=lambda: {"cpu": "500m", "memory": "1Gi"})
    limits: ResourceMap = Field(default_factory=lambda: {"memory": "8Gi"})


class ControllerSpec(ComponentBase):
    resources: ControllerResources = Field(default_factory=ControllerResources)
    spool: SpoolVolume = Field(default_factory=SpoolVolume)


class LoginService(ApiModel):
    """How users reach sshd. ClusterIP by default: nothing is exposed until the admin chooses a
    NodePort, or a LoadBalancer with the source ranges it may be reached from (never world-open by
    default; `0.0.0.0/0` written out is an explicit choice)."""

    model_config = ConfigDict(json_schema_extra=cel((
        "!has(self.loadBalancerSourceRanges) || size(self.loadBalancerSourceRanges) == 0 || "
        "(has(self.type) && self.type == 'LoadBalancer')",
        "loadBalancerSourceRanges applies only to type LoadBalancer"), (
        "!has(self.type) || self.type != 'LoadBalancer' || "
        "(has(self.loadBalancerSourceRanges) && size(self.loadBalancerSourceRanges) > 0)",
        "type LoadBalancer needs loadBalancerSourceRanges: who may reach the login nodes"), (
        "!has(self.nodePort) || (has(self.type) && self.type != 'ClusterIP')",
        "nodePort needs type NodePort or LoadBalancer")))

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    node_port: Optional[int] = Field(default=None, ge=30000, le=32767)
    load_balancer_source_ranges: list[Cidr] = Field(default_factory=list, max_length=64)
    annotations: AnnotationMap = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ranges_need_load_balancer(self) -> "LoginService":
        if self.load_balancer_source_ranges and self.type != "LoadBalancer":
            raise ValueError("loadBalancerSourceRanges applies only to type LoadBalancer")
        if self.type == "LoadBalancer" and not self.load_balancer_source_ranges:
            raise ValueError("type LoadBalancer needs loadBalancerSourceRanges: who may reach the login nodes")
        if self.node_port is not None and self.type == "ClusterIP":
            raise ValueError("nodePort needs type NodePort or LoadBalancer")
        return self


def _zero_or_at_least(field: str, least: str, least_int: int) -> str:
    """CEL: an int-or-string quantity that is 0 or at least `least` (the CRD's copy of SessionLimits._none_or_enough)."""
    return (f"!has(self.{field}) || (type(self.{field}) == int ? (self.{field} == 0 || self.{field} >= {least_int}) : "
            f"(quantity(self.{field}).compareTo(quantity('0')) == 0 || quantity(self.{field}).compareTo(quantity('{least}')) >= 0))")


# A session needs sshd's processes and a shell; the kernel's smallest CFS quota is 1 ms per 100 ms.
MIN_SESSION_MEMORY, MIN_SESSION_CPU = "64Mi", "10m"
# The largest CFS quota the kernel takes (max_cfs_runtime: 2^44 - 1 µs) over the period the login
# nodes write (node/session_limits.py's CPU_PERIOD_US, 100 ms), in CPUs.
MAX_SESSION_CPUS = (2**44 - 1) // 100_000


class SessionLimits(ApiModel):
    """What all of one ssh user's sessions on a login node may use together: one cgroup per user and
    login node, the kernel's OOM killer within it. Root is not limited. "0" leaves that limit out."""

    model_config = ConfigDict(json_schema_extra=cel(
        {"rule": _zero_or_at_least("memory", MIN_SESSION_MEMORY, 64 * 2**20), "fieldPath": ".memory",
         "message": f"memory: 0 (no limit) or at least {MIN_SESSION_MEMORY}"},
        {"rule": _zero_or_at_least("cpu", MIN_SESSION_CPU, 1), "fieldPath": ".cpu",
         "message": f"cpu: 0 (no limit) or at least {MIN_SESSION_CPU}"},
        {"rule": f"!has(self.cpu) || (type(self.cpu) == int ? self.cpu <= {MAX_SESSION_CPUS} : "
                 f"quantity(self.cpu).compareTo(quantity('{MAX_SESSION_CPUS}')) <= 0)", "fieldPath": ".cpu",
         "message": f"cpu: at most {MAX_SESSION_CPUS} (the largest CFS quota the kernel takes)"}))

    memory: Quantity = Field(default="4Gi", description="memory of one user's sessions together; 0: none")
    cpu: Quantity = Field(default="2", description="CPUs of one user's sessions together (500m: half a CPU); 0: none")

    @field_validator("memory", "cpu")
    @classmethod
    def _none_or_enough(cls, value: str, info: ValidationInfo) -> str:
        least = MIN_SESSION_MEMORY if info.field_name == "memory" else MIN_SESSION_CPU
        if value and 0 < quantity_value(value) < quantity_value(least):
            raise ValueError(f"{info.field_name}: 0 (no limit) or at least {least}, not {value}")
        if info.field_name == "cpu" and quantity_value(value) > MAX_SESSION_CPUS:
            raise ValueError(f"cpu: at most {MAX_SESSION_CPUS} (the largest CFS quota the kernel takes), not {value}")
        return value

    @property
    def memory_bytes(self) -> int:
        return math.ceil(quantity_value(self.memory))

    @property
    def cpu_milli(self) -> int:
        return math.ceil(quantity_value(self.cpu) * 1000)

    @property
    def enabled(self) -> bool:
        return bool(self.memory_bytes or self.cpu_milli)


class LoginSpec(ComponentBase):
    resources: LoginResources = Field(default_factory=LoginResources)
    replicas: int = Field(default=1, ge=0, le=64)
    max_user_processes: int = Field(
        default=4096, ge=0, le=4194304,
        description="RLIMIT_NPROC of login sessions: processes per user, so a fork bomb stops there; 0: none")
    service: LoginService = Field(default_factory=LoginService)
    root_ssh_public_keys: list[SshPublicKey] = Field(
        default_factory=list, max_length=256,
        description="the only keys root may log in with; none (the default): root cannot log in by ssh")
    allow_forwarding: bool = Field(default=False, description="allow ssh TCP and agent forwarding")
    session_limits: SessionLimits = Field(default_factory=SessionLimits)
    host_users: bool = Field(
        default=True, description="false: the login pods run in a user namespace of their own (the pod's "
        "hostUsers), so root in an ssh session or the login container is an unprivileged id on the Kubernetes "
        "node. Needs the nodes nodeSets[].hostUsers does and, with sessionLimits, the operator chart's "
        "cgroupDelegate (docs/security.md)")

    @model_validator(mode="after")
    def _sessions_fit_the_pod(self) -> "LoginSpec":
        limit = self.resources.limits.get("memory")
        if limit is not None and self.session_limits.memory_bytes > quantity_value(limit):
            raise AtField(("sessionLimits", "memory"), f"{self.session_limits.memory} is more than the login pod's "
                          f"resources.limits.memory ({limit}): the pod's limit would kill sessions first")
        return self


class JailVolume(ApiModel):
    """The shared root filesystem. Exactly one source; default: the PVC `<cluster>-jail`."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("!(has(self.claimName) && has(self.hostPath))", "set either claimName or hostPath, not both")))

    claim_name: Optional[DnsLabel] = None
    host_path: Optional[JailHostPath] = None

    @model_validator(mode="after")
    def _one_source(self) -> "JailVolume":
        if self.claim_name and self.host_path:
            raise ValueError("set either claimName or hostPath, not both")
        return self


class JailSubMount(ApiModel):
    """An extra volume mounted inside the jail, e.g. a fast scratch disk at /scratch."""

    # Its pod volume is `jail-sub-<name>`, a DNS label of 63 characters at most.
    name: Annotated[str, Field(min_length=1, max_length=63 - len("jail-sub-"), pattern=DNS_LABEL_PATTERN)]
    mount_path: JailSubMountPath
    claim_name: DnsLabel
    read_only: bool = False


class JailSpec(ApiModel):
    volume: JailVolume = Field(default_factory=JailVolume)
    sub_mounts: list[JailSubMount] = Field(default_factory=list, max_length=32, json_schema_extra=cel(
        unique_rule("name", "subMounts: duplicate name"), unique_rule("mountPath", "subMounts: duplicate mountPath"),
        ("self.all(m, !self.exists(n, n.mountPath.startsWith(m.mountPath + '/')))",
         "subMounts: one mountPath lies inside another")))

    @field_validator("sub_mounts")
    @classmethod
    def _apart(cls, sub_mounts: list[JailSubMount]) -> list[JailSubMount]:
        return distinct_sub_mounts(sub_mounts)


def distinct_sub_mounts(sub_mounts: list[JailSubMount]) -> list[JailSubMount]:
    for attr in ("name", "mount_path"):
        refuse_duplicates([getattr(m, attr) for m in sub_mounts], f"duplicate {attr} {{!r}}")
    for outer in sub_mounts:
        for inner in sub_mounts:
            if inner.mount_path.startswith(outer.mount_path + "/"):
                raise ValueError(f"{inner.mount_path!r} lies inside {outer.mount_path!r}")
    return sub_mounts


# Names a node set may not take: its StatefulSet and pods are `<cluster>-<name>[-N]`, next to the
# controller's, login's and accounting's StatefulSets and the populate Job's pods. Accounting's are
# reserved while it is off too: turning it on must not collide with a node set that exists.
RESERVED_NODE_SET_NAMES = (CONTROLLER, LOGIN, POPULATE_JAIL, SLURMDBD, DATABASE)
# A StatefulSet's pods carry `controller-revision-hash: <statefulset>-<10 characters>`, a label value
# of at most 63 characters: `<cluster>-<node set>` must stay within 52.
MAX_STATEFUL_SET_NAME = 52


class LocalVolume(ApiModel):
    """A volume each worker of the node set has to itself (one PVC per pod, from a
    volumeClaimTemplate), e.g. local NVMe scratch, mounted inside the jail at mountPath."""

    mount_path: JailSubMountPath
    size: PositiveQuantity
    storage_class_name: Optional[DnsLabel] = None


class DrainTimeout(ApiModel):
    """How long a scale-in or an update waits for the jobs on a node it drained, and what then."""

    after_seconds: int = Field(ge=1, le=31_536_000, description="counted from the operator's drain of the node")
    action: Literal["Cancel", "Warn"] = Field(
        description="Cancel: cancel the jobs still running there (as scancel does) so the node can go; "
        "Warn: keep waiting, with condition reason DrainTimedOut and a Warning event")


# slurm.conf's keys that elastic node sets rest on (render/configs.py): Slurm resumes their nodes for
# jobs, and only the operator powers one down.
POWER_SAVING_KEYS = ("ResumeProgram", "SuspendProgram", "SuspendTime", "SuspendTimeout", "SuspendExcNodes",
                     "SuspendExcParts", "SuspendExcStates")


class Autoscale(ApiModel):
    """Sizing by demand: Slurm knows `max` nodes of the node set, powered down until a job needs them
    (its power saving); the operator runs the pods of the nodes Slurm powers up, and releases a node
    idle for `idleSeconds` through the drain-first scale-in, down to `min`."""

    model_config = ConfigDict(json_schema_extra=cel(("!has(self.min) || self.min <= self.max", "min: more than max")))

    min: int = Field(default=0, ge=0, le=65536, description="workers always running (0: none while no job needs one)")
    max: int = Field(ge=1, le=65536, description="the most workers the node set may have: Slurm's records of it")
    idle_seconds: int = Field(default=600, ge=10, le=31_536_000, description="how long a worker runs no job "
                              "before it is released (counted from its last job's end, or its start)")
    resume_timeout: Optional[int] = Field(default=None, ge=10, le=65533, description="seconds a started worker's "
                                          "pod may take to register; then the operator sets its Slurm node down "
                                          "with what holds the pod back (unschedulable, an image pull), Slurm "
                                          "requeues its jobs, and the record is powered down to be tried again. "
                                          "Below slurmConfig.resumeTimeout, Slurm's own limit for every node; "
                                          "unset: that one")

    @model_validator(mode="after")
    def _min_within_max(self) -> "Autoscale":
        if self.min > self.max:
            raise AtField(("min",), f"{self.min} is more than max ({self.max})")
        return self


# The resource a worker's GPUs are asked for with (render/worker.py renders gpus as its limit).
GPU_RESOURCE = "nvidia.com/gpu"


def device_file_count(files: str) -> int | str:
    """How many device files a gres.conf File= names (/dev/x[0-3,5] is five), or why it is not a range."""
    if "[" not in files:
        return 1
    count = 0
    for part in files[files.index("[") + 1:-1].split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            return f"[{files.split('[', 1)[1]}: not a list of numbers and ranges (e.g. [0-3,5])"
        if dash and int(high) < int(low):
            return f"range {part} runs backwards: slurmd refuses to start"
        count += int(high) - int(low) + 1 if dash else 1
    return count


HOST_USERS_DEVICES = ("hostUsers: false with gpus or gres: Slurm's device confinement needs the Kubernetes node's "
                      "user namespace, so a job could open every device of its worker")


class NodeSetSpec(ComponentBase):
    """A group of workers with the same hardware: its own StatefulSet, and a Slurm NodeSet and
    feature both named after it, which partitions span."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("!(self.name in " + str(list(RESERVED_NODE_SET_NAMES)) + ")",
         "name: reserved for another object of the cluster"),
        ("!has(self.gpuType) || (has(self.gpus) && self.gpus > 0)", "gpuType needs gpus > 0"),
        ("!has(self.localVolume) || !has(self.subMounts) || !self.subMounts.exists(m, " + overlap_rule(
            "m.mountPath", "self.localVolume.mountPath") + ")",
         "localVolume.mountPath overlaps one of the node set's subMounts"),
        ("!has(self.gresFiles) || self.gresFiles.all(k, has(self.gres) && "
         "self.gres.exists(g, g.substring(0, g.lastIndexOf(':')) == k))",
         "gresFiles: every key must be one of gres's entries without its count (name or name:type)"),
        ("!has(self.autoscale) || !has(self.replicas) || (self.replicas <= self.autoscale.max && "
         "self.replicas >= (has(self.autoscale.min) ? self.autoscale.min : 0))",
         "replicas: outside autoscale's min and max (autoscale sizes the node set; leave replicas out)"),
        ("!has(self.hostUsers) || self.hostUsers || ((!has(self.gpus) || self.gpus == 0) && "
         "(!has(self.gres) || size(self.gres) == 0))", HOST_USERS_DEVICES)))

    name: NodeSetName
    # Not filled in by the apiserver (no schema default): an autoscaling node set leaves it out, and a
    # defaulted 2 would contradict its range (found on the real apiserver).
    replicas: int = Field(default=2, ge=0, le=65536, json_schema_extra=lambda schema: schema.pop("default", None),
                          description="the workers of a fixed-size node set (default 2); leave it out with autoscale")
    image: Optional[ImageRef] = Field(default=None, description="default: images.worker")
    cpus: int = Field(default=1, ge=1, le=16384)
    real_memory_mib: int = Field(default=1024, ge=1, le=MAX_SAFE_INTEGER, description="RealMemory of each node, in MiB "
                                 "(at most its pod's memory limit: jobs are held to it)")
    gpus: int = Field(default=0, ge=0, le=64)
    gpu_type: Optional[SlurmName] = Field(
        default=None, description="the GPUs' Slurm type (as NVML names them, e.g. nvidia_h100_80gb_hbm3): "
        "jobs then ask for --gres=gpu:<type>:N")
    gres: list[GresEntry] = Field(
        default_factory=list, max_length=16, description="more Gres= entries 'name[:type]:count', e.g. 'shard:8'",
        json_schema_extra=cel(("self.all(g, !g.startsWith('gpu:'))", "GPUs are set by gpus, not as gres")))
    gres_files: dict[str, GresDeviceFiles] = Field(
        default_factory=dict, max_length=16, description="the device files of a gres entry (key: its "
        "name[:type]), gres.conf's File=, e.g. '/dev/infiniband/uverbs[0-3]': with ConstrainDevices a job "
        "opens only those of the gres it was given", json_schema_extra=cel(
            (f"self.all(k, k.matches('{GRES_NAME_PATTERN}'))", "gresFiles: a key is a gres name[:type]")))
    features: list[SlurmName] = Field(default_factory=list, max_length=32)
    features_from_node_labels: list[LabelKey] = Field(
        default_factory=list, max_length=16, description="Kubernetes node label keys (e.g. topology.kubernetes.io/"
        "zone): each worker's Slurm node gets the feature key=value of the Kubernetes node its pod runs on, set by "
        "the operator once slurmd registered and again when the labels change; jobs ask with --constraint=key=value",
        json_schema_extra=cel(("self.all(a, self.exists_one(b, b == a))", "featuresFromNodeLabels: a key is listed twice")))
    shared_memory_size: PositiveQuantity = "64Mi"
    # Bounded tighter than the jail's: the apiserver's CEL cost budget covers every node set's list.
    sub_mounts: list[JailSubMount] = Field(
        default_factory=list, max_length=8, description="more volumes inside the jail, on this node set's "
        "workers only (after spec.jail.subMounts)", json_schema_extra=cel(
            unique_rule("name", "subMounts: duplicate name"), unique_rule("mountPath", "subMounts: duplicate mountPath")))
    local_volume: Optional[LocalVolume] = None
    maintenance: bool = Field(
        default=False, description="drain every worker of the node set and hold it (running jobs finish, no new "
        "one starts; nothing is deleted); off again: only these drains are undone")
    max_unavailable: int = Field(
        default=1, ge=1, le=65536, description="how many of its workers an update takes out of service at a "
        "time: each is drained, waited for until it runs nothing, then its pod replaced")
    drain_timeout: Optional[DrainTimeout] = Field(
        default=None, description="absent: a scale-in or an update waits for running jobs with no deadline")
    pyxis: Pyxis = Field(default_factory=Pyxis, description="container jobs (srun/sbatch --container-image)")
    autoscale: Optional[Autoscale] = Field(
        default=None, description="size the node set by demand (Slurm's power saving) instead of replicas")
    replace_unhealthy: bool = Field(
        default=False, description="move a worker off a Kubernetes node where one of healthCheck."
        "kubernetesNodeConditions is True: once its Slurm node is drained (its jobs done), the operator cordons "
        "that node and deletes the pod, which its StatefulSet makes again elsewhere; the cordon is lifted once "
        "the condition clears. Needs the operator chart's replaceUnhealthyWorkers (patch on nodes)")

    host_users: bool = Field(
        default=True, description="false: the workers run in a user namespace of their own (the pod's hostUsers), "
        "so root in a job step or the worker is an unprivileged id on the Kubernetes node. Needs nodes that "
        "run such pods (Kubernetes 1.33+, containerd 2+, runc 1.2+, Linux 6.3+, the jail on a file system "
        "that supports idmapped mounts: not NFS) and, with Slurm's cgroup plugins, the operator chart's "
        "cgroupDelegate; with Pyxis mounting images, a /dev/fuse of mode 0666 on the node (udev's default); "
        "no gpus or gres (docs/security.md)")

    @model_validator(mode="after")
    def _user_namespace_fits(self) -> "NodeSetSpec":
        if self.host_users:
            return self
        if self.gpus or self.gres:
            raise AtField(("hostUsers",), HOST_USERS_DEVICES.split(": ", 1)[1])
        return self

    @model_validator(mode="after")
    def _replicas_within_autoscale(self) -> "NodeSetSpec":
        scale = self.autoscale
        if scale and "replicas" in self.model_fields_set and not scale.min <= self.replicas <= scale.max:
            raise AtField(("replicas",), f"{self.replicas} is outside autoscale's min {scale.min} and max "
                                         f"{scale.max} (autoscale sizes the node set; leave replicas out)")
        return self

    def most_workers(self) -> int:
        """The workers it may have at once: its Slurm node records when it autoscales."""
        return self.autoscale.max if self.autoscale else self.replicas

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name in RESERVED_NODE_SET_NAMES:
            raise ValueError(f"{name!r} is reserved for another object of the cluster")
        return name

    @field_validator("gpu_type")
    @classmethod
    def _type_needs_gpus(cls, gpu_type: Optional[str], info: ValidationInfo) -> Optional[str]:
        if gpu_type and not info.data.get("gpus"):
            raise ValueError("gpuType needs gpus > 0")
        return gpu_type

    @field_validator("gres")
    @classmethod
    def _gres_consistent(cls, gres: list[str], info: ValidationInfo) -> list[str]:
        names = [g.split(":", 1)[0] for g in gres]
        if "gpu" in names:
            zero = " (it is 0)" if info.data.get("gpus") == 0 else ""
            raise ValueError(f"GPUs are set by gpus{zero}, not as a gres entry")
        refuse_duplicates(names)
        return gres

    @field_validator("features_from_node_labels")
    @classmethod
    def _label_keys(cls, keys: list[str]) -> list[str]:
        return label_keys(keys)

    @field_validator("gres_files")
    @classmethod
    def _gres_files_named(cls, files: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if "gres" not in info.data:
            return files  # gres itself was refused: that error names the cause
        entries = {g.rsplit(":", 1)[0] for g in info.data["gres"]}
        for key in files:
            if not re.fullmatch(GRES_NAME_PATTERN, key):
                raise ValueError(f"{key!r} is not a gres name[:type]")
            if key not in entries:
                raise ValueError(f"{key!r} is none of gres's entries without its count ({', '.join(sorted(entries)) or 'gres is empty'})")
        return files

    @field_validator("sub_mounts")
    @classmethod
    def _apart(cls, sub_mounts: list[JailSubMount]) -> list[JailSubMount]:
        return distinct_sub_mounts(sub_mounts)

    @model_validator(mode="after")
    def _devices_slurmd_takes(self) -> "NodeSetSpec":
        """What slurmd refuses at start (slurmctld never sees it): a gres's device files and its count
        apart, a device range written backwards, shards without the GPUs they share."""
        counts = {g.rsplit(":", 1)[0]: int(g.rsplit(":", 1)[1]) for g in self.gres}
        for key, files in self.gres_files.items():
            listed = device_file_count(files)
            if isinstance(listed, str):
                raise AtField(("gresFiles", key), listed)
            if key in counts and listed != counts[key]:
                raise AtField(("gresFiles", key), f"{files} is {listed} device file(s), gres {key} counts "
                                                  f"{counts[key]}: slurmd refuses to start when they differ")
        for i, entry in enumerate(self.gres):
            if entry.split(":", 1)[0] == "shard" and not self.gpus:
                raise AtField(("gres", i), "shard shares GPUs, and the node set has none (gpus: 0): slurmd "
                                           "refuses to start")
        return self

    @model_validator(mode="after")
    def _resources_match_slurm(self) -> "NodeSetSpec":
        """The pod's resources and the Slurm node's: the GPU count comes from gpus (the rendered limit
        is gpus), and slurmd offers `cpus` CPUs the pod must be able to use."""
        for field, values in (("requests", self.resources.requests), ("limits", self.resources.limits)):
            amount = values.get(GPU_RESOURCE)
            if amount is not None and quantity_value(amount) != self.gpus:
                raise AtField(("resources", field, GPU_RESOURCE),
                              f"{amount} is not gpus ({self.gpus}): the worker's {GPU_RESOURCE} limit is gpus, and a "
                              "request that differs from it is refused by the apiserver (leave it out: gpus sets it)")
        cpu_limit = self.resources.limits.get("cpu")
        if cpu_limit is not None and quantity_value(cpu_limit) < self.cpus:
            raise AtField(("resources", "limits", "cpu"), f"{cpu_limit} is below cpus ({self.cpus}): Slurm would "
                                                          "schedule CPUs the pod never gets")
        return self

    @model_validator(mode="after")
    def _fits_its_pod(self) -> "NodeSetSpec":
        limit = self.resources.limits.get("memory")
        if limit is not None and self.real_memory_mib * 2**20 > quantity_value(limit):
            raise AtField(("realMemoryMib",), f"{self.real_memory_mib} MiB is more than resources.limits.memory "
                                              f"({limit}): jobs Slurm fits there would be killed by the pod's limit")
        if self.local_volume is not None:
            hit = overlapping(self.local_volume.mount_path, [m.mount_path for m in self.sub_mounts])
            if hit:
                raise AtField(("localVolume", "mountPath"), f"overlaps the node set's sub-mount at {hit}")
        return self


# Where a Kubernetes cluster keeps what a login shell must not reach: RFC 1918, shared (CGNAT) and
# link-local (cloud metadata) IPv4; unique-local and link-local IPv6.
PRIVATE_RANGES = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16",
                  "fc00::/7", "fe80::/10"]


class ClusterDns(ApiModel):
    """Where the Kubernetes cluster serves DNS: the only place port 53 may be reached. The default is
    CoreDNS as kubeadm, EKS, GKE and AKS deploy it."""

    namespace: DnsLabel = "kube-system"
    pod_labels: LabelMap = Field(default_factory=lambda: {"k8s-app": "kube-dns"})
    cidrs: list[Cidr] = Field(default_factory=list, max_length=8, description="more DNS servers by address, e.g. "
                              "NodeLocal DNSCache's 169.254.20.10/32")


class NetworkPolicySpec(ApiModel):
    """Egress of login and worker pods (soperator/render/network_policy.py); it takes effect where
    the cluster's network plugin enforces NetworkPolicy."""

    enabled: bool = True
    blocked_egress_cidrs: list[Cidr] = Field(default_factory=lambda: list(PRIVATE_RANGES), max_length=64)
    dns: ClusterDns = Field(default_factory=ClusterDns)


class PopulateJailSpec(ApiModel):
    overwrite: bool = Field(default=False, description="replace the jail's system files on the next run")
    backoff_limit: int = Field(default=2, ge=0, le=10)


class SecretRefs(ApiModel):
    """Existing Secrets to use instead of generating keys."""

    munge_key: Optional[SecretName] = None
    ssh_host_keys: Optional[SecretName] = None
    jwt_key: Optional[SecretName] = Field(
        default=None, description="a Secret whose key jwt_hs256.key signs the operator's slurmrestd tokens")


DbName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,64}$")]


class ExternalDatabase(ApiModel):
    """A MySQL/MariaDB the cluster's admin runs; slurmdbd gets its own database and user there."""

    model_config = ConfigDict(json_schema_extra=cel((
        "!(self.host.lowerAscii() in ['localhost', 'localhost.localdomain']) && "
        "!self.host.lowerAscii().endsWith('.localhost') && !self.host.startsWith('127.') && self.host != '0.0.0.0'",
        "host: the slurmdbd pod has no database of its own (localhost is the pod itself)")))

    host: Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$")]
    port: int = Field(default=PORTS.database, ge=1, le=65535)
    user: DbName = "slurm"
    database: DbName = "slurm_acct_db"
    password_secret: SecretName = Field(description="a Secret in the cluster's namespace whose key `password` "
                                      "is the user's password")

    @field_validator("host")
    @classmethod
    def _not_the_pod_itself(cls, host: str) -> str:
        lower = host.lower()
        if lower in ("localhost", "localhost.localdomain") or lower.endswith(".localhost") or \
                host.startswith("127.") or host == "0.0.0.0":
            raise ValueError(f"{host}: the slurmdbd pod has no database of its own (localhost is the pod itself)")
        return host


class ManagedDatabase(ApiModel):
    """The MariaDB the operator runs for the cluster (image `database`), its data on a PVC."""

    claim_name: Optional[DnsLabel] = Field(default=None, description="an existing PVC (e.g. from the "
                                           "slurm-cluster-storage chart, kept on uninstall); else one per pod")
    size: PositiveQuantity = "10Gi"
    storage_class_name: Optional[DnsLabel] = None


class AccountingSpec(ApiModel):
    """slurmdbd and its database: job history (sacct), fair share, QoS and limits."""

    enabled: bool = False
    external: Optional[ExternalDatabase] = Field(default=None, description="absent: the operator runs MariaDB")
    managed: ManagedDatabase = Field(default_factory=ManagedDatabase)


# Slurm's MAX_SLURM_NODES: slurmctld refuses a MaxNodeCount above it.
MAX_SLURM_NODES = 65536


def _node_sets_default() -> list[NodeSetSpec]:
    return [NodeSetSpec(name="worker")]


class SlurmClusterSpec(ApiModel):
    cluster_domain: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")] = "cluster.local"
    node_sets: list[NodeSetSpec] = Field(
        default_factory=_node_sets_default, min_length=1, max_length=16,
        description="groups of workers, each its own StatefulSet and Slurm NodeSet",
        json_schema_extra=cel(unique_rule("name", "duplicate node set name"), (
            "self.all(a, !has(a.features) || a.features.all(f, f == a.name || !self.exists(b, b.name == f)))",
            "a feature may not be another node set's name: that node set would take these nodes")))
    partitions: list[Partition] = Field(
        default_factory=lambda: [Partition(name="main", default=True)], min_length=1, max_length=64,
        json_schema_extra=cel(("self.filter(p, has(p.default) && p.default).size() <= 1",
                               "only one partition may be the default"),
                              unique_rule("name", "duplicate partition name")))
    slurm_version: Literal[releases.SUPPORTED] = Field(  # type: ignore[valid-type]
        default=releases.DEFAULT,
        description="the Slurm release every daemon runs (the images must carry it). Raising it on a running cluster "
                    "upgrades in place, in Slurm's order: slurmdbd, slurmctld, the workers drain-first, login last; "
                    "a downgrade, or a jump over more than three releases, is refused and changes nothing")
    images: Images = Field(default_factory=Images)
    controller: ControllerSpec = Field(default_factory=ControllerSpec)
    login: LoginSpec = Field(default_factory=LoginSpec)
    jail: JailSpec = Field(default_factory=JailSpec)
    populate_jail: PopulateJailSpec = Field(default_factory=PopulateJailSpec)
    secrets: SecretRefs = Field(default_factory=SecretRefs)
    accounting: AccountingSpec = Field(default_factory=AccountingSpec)
    slurm_config: SlurmConfig = Field(default_factory=SlurmConfig)
    cgroup_config: CgroupConfig = Field(default_factory=CgroupConfig)
    plug_stack: PlugStack = Field(default_factory=PlugStack)
    health_check: HealthCheck = Field(default_factory=HealthCheck)
    topology: Optional[TopologySpec] = Field(default=None, description="Slurm's network topology from the labels "
                                             f"of the Kubernetes nodes the workers run on (Slurm {releases.TOPOLOGY} "
                                             "and later)")
    network_policy: NetworkPolicySpec = Field(default_factory=NetworkPolicySpec)
    identity: Optional[IdentitySpec] = Field(default=None, description="users and groups from an LDAP directory "
                                             "(SSSD on every node); unset: the jail's own accounts only")
    maintenance: bool = Field(default=False, description="maintenance for every node set at once")

    model_config = ConfigDict(json_schema_extra=cel(
        ("!has(self.nodeSets) || !self.nodeSets.exists(n, has(n.autoscale)) || !has(self.slurmConfig) || "
         "!has(self.slurmConfig.extra) || self.slurmConfig.extra.all(k, !(k.lowerAscii() in "
         f"{sorted(k.lower() for k in POWER_SAVING_KEYS)}))",
         "slurmConfig.extra: power saving's keys are soperator's while a node set autoscales"),
        ("!has(self.nodeSets) || self.nodeSets.map(n, has(n.autoscale) ? n.autoscale.max : "
         "(has(n.replicas) ? n.replicas : 2)).sum() <= "
         "(has(self.slurmConfig) && has(self.slurmConfig.maxNodeCount) ? self.slurmConfig.maxNodeCount : 1024)",
         "nodeSets: more workers in all (replicas, or autoscale.max) than slurmConfig.maxNodeCount"),
        ("!has(self.nodeSets) || self.nodeSets.all(n, !has(n.autoscale) || !has(n.autoscale.resumeTimeout) || "
         "n.autoscale.resumeTimeout < (has(self.slurmConfig) && has(self.slurmConfig.resumeTimeout) ? "
         "self.slurmConfig.resumeTimeout : 600))",
         "nodeSets: autoscale.resumeTimeout must be below slurmConfig.resumeTimeout, which Slurm applies first"),
        ("!has(self.healthCheck) || !has(self.healthCheck.nodeStates) || !self.healthCheck.nodeStates.exists(s, s in "
         f"{list(ALONE_STATES)}) || !has(self.slurmVersion) || self.slurmVersion in "
         f"{[r for r in releases.SUPPORTED if releases.at_least(r, releases.HEALTH_CHECK_ALONE_STATES)]}",
         f"healthCheck.nodeStates: START_ONLY and REBOOT_ONLY need slurmVersion {releases.HEALTH_CHECK_ALONE_STATES} "
         "or later (an older Slurm ignores them and runs the check in every state)"),
        ("!has(self.identity) || !has(self.jail) || !has(self.jail.subMounts) || !self.jail.subMounts.exists(m, "
         "m.mountPath == '/home' && has(m.readOnly) && m.readOnly)",
         "jail.subMounts: /home is read-only, and directory users' homes are made at their first login"),
        ("!has(self.topology) || !has(self.slurmVersion) || self.slurmVersion in "
         f"{[r for r in releases.SUPPORTED if releases.at_least(r, releases.TOPOLOGY)]}",
         f"topology: needs slurmVersion {releases.TOPOLOGY} or later (its nodes join the topology as they register)"),
        ("!has(self.topology) || !has(self.slurmConfig) || !has(self.slurmConfig.extra) || "
         "self.slurmConfig.extra.all(k, !(k.lowerAscii() in ['topologyplugin', 'topologyparam']))",
         "slurmConfig.extra: TopologyPlugin and TopologyParam are spec.topology's while it is set"),
        ("!has(self.nodeSets) || !self.nodeSets.exists(n, has(n.replaceUnhealthy) && n.replaceUnhealthy) || "
         "(has(self.healthCheck) && has(self.healthCheck.kubernetesNodeConditions) && "
         "size(self.healthCheck.kubernetesNodeConditions) > 0)",
         "nodeSets: replaceUnhealthy needs healthCheck.kubernetesNodeConditions, the conditions that make a node bad"),
        ("!has(self.healthCheck) || !has(self.healthCheck.active) || self.healthCheck.active.all(c, "
         "!has(c.nodeSets) || c.nodeSets.all(s, has(self.nodeSets) ? self.nodeSets.exists(n, n.name == s) : "
         "s == 'worker'))", "healthCheck.active: nodeSets must name node sets of spec.nodeSets"),
        ("!has(self.healthCheck) || !has(self.healthCheck.active) || self.healthCheck.active.all(c, !has(c.gpusOnly) "
         "|| !c.gpusOnly || (has(self.nodeSets) && self.nodeSets.exists(n, has(n.gpus) && n.gpus > 0 && "
         "(!has(c.nodeSets) || n.name in c.nodeSets))))",
         "healthCheck.active: a gpusOnly check needs a node set with GPUs among its node sets"),
        ("!has(self.partitions) || self.partitions.all(p, !has(p.nodeSets) || p.nodeSets.all(s, "
         "has(self.nodeSets) ? self.nodeSets.exists(n, n.name == s) : s == 'worker'))",
         "partitions: nodeSets must name node sets of spec.nodeSets"),
        ("(has(self.slurmConfig) && has(self.slurmConfig.maxNodeCount) ? self.slurmConfig.maxNodeCount : 1024) + "
         f"(has(self.nodeSets) ? size(self.nodeSets) : 1) <= {MAX_SLURM_NODES}",
         f"slurmConfig.maxNodeCount and one placeholder a node set exceed Slurm's {MAX_SLURM_NODES} nodes"),
        ("!has(self.nodeSets) || !has(self.jail) || !has(self.jail.subMounts) || self.nodeSets.all(n, "
         "(!has(n.subMounts) || n.subMounts.all(m, !self.jail.subMounts.exists(j, j.name == m.name || "
         + overlap_rule("j.mountPath", "m.mountPath") + "))) && (!has(n.localVolume) || "
         "!self.jail.subMounts.exists(j, " + overlap_rule("j.mountPath", "n.localVolume.mountPath") + ")))",
         "a node set's subMounts and localVolume may not share a name or a path with spec.jail.subMounts, "
         "nor lie inside or around one")))

    def image(self, component: str) -> str:
        """The component's image for the release the spec runs (images.ref)."""
        return self.images.ref(component, self.slurm_version)

    @field_validator("node_sets")
    @classmethod
    def _node_sets_apart(cls, node_sets: list[NodeSetSpec]) -> list[NodeSetSpec]:
        names = [n.name for n in node_sets]
        refuse_duplicates(names, "duplicate name {!r}")
        for i, node_set in enumerate(node_sets):
            for j, feature in enumerate(node_set.features):
                if feature != node_set.name and feature in names:
                    raise AtField((i, "features", j), f"{feature!r} is another node set's name: that node set "
                                                      "would take these nodes")
        return node_sets

    @model_validator(mode="after")
    def _node_set_mounts_apart_from_the_jails(self) -> "SlurmClusterSpec":
        jail = self.jail.sub_mounts
        for i, node_set in enumerate(self.node_sets):
            for j, sub in enumerate(node_set.sub_mounts):
                if sub.name in [m.name for m in jail]:
                    raise AtField(("nodeSets", i, "subMounts", j, "name"),
                                  f"{sub.name!r} is a name in spec.jail.subMounts too: one pod volume for two")
                hit = overlapping(sub.mount_path, [m.mount_path for m in jail])
                if hit:
                    raise AtField(("nodeSets", i, "subMounts", j, "mountPath"),
                                  f"overlaps spec.jail.subMounts' {hit}: one mount would hide the other")
            hit = node_set.local_volume and overlapping(node_set.local_volume.mount_path, [m.mount_path for m in jail])
            if hit:
                raise AtField(("nodeSets", i, "localVolume", "mountPath"),
                              f"overlaps spec.jail.subMounts' {hit}: one mount would hide the other")
        return self

    @model_validator(mode="after")
    def _power_saving_ours(self) -> "SlurmClusterSpec":
        if any(n.autoscale for n in self.node_sets):
            for key in self.slurm_config.extra:
                if key.lower() in {k.lower() for k in POWER_SAVING_KEYS}:
                    raise AtField(("slurmConfig", "extra", key), "power saving's, which soperator sets while a "
                                  "node set autoscales (spec.nodeSets[].autoscale)")
        return self

    @model_validator(mode="after")
    def _topology_supported(self) -> "SlurmClusterSpec":
        if self.topology is None:
            return self
        if not releases.at_least(self.slurm_version, releases.TOPOLOGY):
            raise AtField(("topology",), f"needs slurmVersion {releases.TOPOLOGY} or later (its nodes join the "
                                         f"topology as they register); this cluster runs {self.slurm_version}")
        for key in self.slurm_config.extra:
            if key.lower() in ("topologyplugin", "topologyparam"):
                raise AtField(("slurmConfig", "extra", key), "spec.topology's while it is set")
        return self

    @model_validator(mode="after")
    def _partitions_resume_after_the_operator(self) -> "SlurmClusterSpec":
        """A partition's ResumeTimeout is Slurm's limit for its nodes: below the operator's wait for a
        node set's pods, Slurm gives their nodes up first."""
        for i, partition in enumerate(self.partitions):
            key = next((k for k in partition.extra if k.lower() == "resumetimeout"), None)
            if key is None:
                continue
            value = partition.extra[key]
            if not value.isdigit() or not 1 <= int(value) <= 65535:
                raise AtField(("partitions", i, "extra", key), f"{value!r}: seconds, 1 to 65535")
            for node_set in self.node_sets:
                if node_set.autoscale is None or (partition.node_sets and node_set.name not in partition.node_sets):
                    continue
                wait = node_set.autoscale.resume_timeout
                if (wait is not None and int(value) <= wait) or (wait is None and int(value) < self.slurm_config.resume_timeout):
                    raise AtField(("partitions", i, "extra", key), f"{value} is not above node set {node_set.name}'s "
                                  f"wait for a worker ({wait or self.slurm_config.resume_timeout} s, autoscale."
                                  "resumeTimeout or slurmConfig.resumeTimeout): Slurm would give its nodes up first")
        return self

    @model_validator(mode="after")
    def _health_check_states_known(self) -> "SlurmClusterSpec":
        states = sorted(set(self.health_check.node_states) & set(ALONE_STATES))
        if states and not releases.at_least(self.slurm_version, releases.HEALTH_CHECK_ALONE_STATES):
            raise AtField(("healthCheck", "nodeStates"), f"{states[0]} needs slurmVersion "
                          f"{releases.HEALTH_CHECK_ALONE_STATES} or later: Slurm {self.slurm_version} ignores it and "
                          "runs the check in every state")
        return self

    @model_validator(mode="after")
    def _directory_users_can_log_in(self) -> "SlurmClusterSpec":
        if self.identity is None:
            return self
        for i, mount in enumerate(self.jail.sub_mounts):
            if mount.mount_path == "/home" and mount.read_only:
                raise AtField(("jail", "subMounts", i, "readOnly"), "directory users' homes are made at their first "
                                                                    "login, in /home: it must be writable")
        ldap = self.identity.ldap
        if not self.network_policy.enabled:
            return self
        for j, uri in enumerate(ldap.uris):
            address = literal_address(uri)
            if address is None:
                continue
            blocked = [c for c in self.network_policy.blocked_egress_cidrs if address in ipaddress.ip_network(c, strict=False)]
            allowed = [c for c in ldap.egress_cidrs if address in ipaddress.ip_network(c, strict=False)]
            if blocked and not allowed:
                raise AtField(("identity", "ldap", "egressCidrs"), f"holds no range with {address} ({uri}), which "
                              f"networkPolicy blocks ({blocked[0]}): SSSD could not reach the directory")
        return self

    @model_validator(mode="after")
    def _room_for_placeholders(self) -> "SlurmClusterSpec":
        room = MAX_SLURM_NODES - len(self.node_sets)
        if self.slurm_config.max_node_count > room:
            raise AtField(("slurmConfig", "maxNodeCount"),
                          f"at most {room} with {len(self.node_sets)} node sets: each keeps a placeholder node "
                          f"record, and Slurm holds {MAX_SLURM_NODES} nodes in all")
        return self

    @model_validator(mode="after")
    def _workers_fit_and_partitions_have_nodes(self) -> "SlurmClusterSpec":
        most = self.slurm_config.max_node_count
        for i, node_set in enumerate(self.node_sets):
            if node_set.autoscale and node_set.autoscale.max > most:
                raise AtField(("nodeSets", i, "autoscale", "max"), f"{node_set.autoscale.max} is more than "
                                                                   f"slurmConfig.maxNodeCount ({most})")
            if node_set.autoscale and (node_set.autoscale.resume_timeout or 0) >= self.slurm_config.resume_timeout:
                raise AtField(("nodeSets", i, "autoscale", "resumeTimeout"),
                              f"{node_set.autoscale.resume_timeout} is not below slurmConfig.resumeTimeout "
                              f"({self.slurm_config.resume_timeout}), which Slurm applies first")
        total = sum(n.most_workers() for n in self.node_sets)
        if total > most:
            raise AtField(("nodeSets",), f"{total} workers in all (replicas, or autoscale.max) is more than "
                                         f"slurmConfig.maxNodeCount ({most})")
        names = [n.name for n in self.node_sets]
        for i, node_set in enumerate(self.node_sets):
            if node_set.replace_unhealthy and not self.health_check.kubernetes_node_conditions:
                raise AtField(("nodeSets", i, "replaceUnhealthy"), "needs healthCheck.kubernetesNodeConditions, "
                                                                    "the conditions that make a node bad")
        for i, check in enumerate(self.health_check.active):
            for j, name in enumerate(check.node_sets):
                if name not in names:
                    raise AtField(("healthCheck", "active", i, "nodeSets", j),
                                  f"no node set {name!r} (spec.nodeSets: {', '.join(names)})")
            if check.gpus_only and not any(n.gpus for n in self.node_sets if not check.node_sets or n.name in
                                           check.node_sets):
                raise AtField(("healthCheck", "active", i, "gpusOnly"), "none of its node sets has GPUs: it would "
                                                                        "never run")
        for i, partition in enumerate(self.partitions):
            for j, name in enumerate(partition.node_sets):
                if name not in names:
                    raise AtField(("partitions", i, "nodeSets", j),
                                  f"no node set {name!r} (spec.nodeSets: {', '.join(names)})")
        return self

    @field_validator("partitions")
    @classmethod
    def _partitions_consistent(cls, partitions: list[Partition]) -> list[Partition]:
        refuse_duplicates([p.name for p in partitions], "duplicate name {!r}")
        if sum(p.default for p in partitions) > 1:
            raise ValueError("only one partition may be the default")
        return partitions
