"""The desired state of one Slurm cluster: the `spec` of a SlurmCluster."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator
from typing_extensions import Annotated

from soperator import __version__
from soperator.api.common import ApiModel, ComponentBase
from soperator.api.fields import (Cidr, DnsLabel, ImageRef, Quantity, SlurmName, SlurmValue,
                                  SshPublicKey)

IMAGE_REPOSITORY = "soperator"


def _default_image(component: str) -> str:
    return f"{IMAGE_REPOSITORY}/{component}:{__version__}"


class Images(ApiModel):
    controller: ImageRef = _default_image("controller")
    worker: ImageRef = _default_image("worker")
    login: ImageRef = _default_image("login")
    populate_jail: ImageRef = _default_image("populate-jail")
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class Partition(ApiModel):
    name: SlurmName
    nodes: SlurmValue = "ALL"
    default: bool = False
    max_time: SlurmValue = "INFINITE"
    state: Literal["UP", "DOWN", "DRAIN", "INACTIVE"] = "UP"
    extra: dict[SlurmName, SlurmValue] = Field(default_factory=dict)


class SpoolVolume(ApiModel):
    """Slurmctld's StateSaveLocation. A PVC keeps job state across controller restarts."""

    claim_name: Optional[DnsLabel] = None
    size: Quantity = "1Gi"
    storage_class_name: Optional[DnsLabel] = None


class ControllerSpec(ComponentBase):
    spool: SpoolVolume = Field(default_factory=SpoolVolume)


class WorkerSpec(ComponentBase):
    replicas: int = Field(default=2, ge=0, le=65536)
    cpus: int = Field(default=1, ge=1, le=16384)
    real_memory_mib: int = Field(default=1024, ge=1, description="RealMemory of each node, in MiB")
    gpus: int = Field(default=0, ge=0, le=64)
    gres: list[SlurmValue] = Field(default_factory=list, description="extra Gres= entries, e.g. 'shard:8'")
    features: list[SlurmName] = Field(default_factory=list)
    shared_memory_size: Quantity = "64Mi"


class LoginService(ApiModel):
    type: Literal["LoadBalancer", "NodePort"] = "LoadBalancer"
    node_port: Optional[int] = Field(default=None, ge=30000, le=32767)
    load_balancer_source_ranges: list[Cidr] = Field(default_factory=list)
    annotations: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ranges_need_load_balancer(self) -> "LoginService":
        if self.load_balancer_source_ranges and self.type != "LoadBalancer":
            raise ValueError("loadBalancerSourceRanges applies only to type LoadBalancer")
        return self


class LoginSpec(ComponentBase):
    replicas: int = Field(default=1, ge=0, le=64)
    service: LoginService = Field(default_factory=LoginService)
    root_ssh_public_keys: list[SshPublicKey] = Field(default_factory=list)


class JailVolume(ApiModel):
    """The shared root filesystem. Exactly one source; default: the PVC `<cluster>-jail`."""

    claim_name: Optional[DnsLabel] = None
    host_path: Optional[Annotated[str, Field(pattern=r"^/[^\n]*$")]] = None

    @model_validator(mode="after")
    def _one_source(self) -> "JailVolume":
        if self.claim_name and self.host_path:
            raise ValueError("set either claimName or hostPath, not both")
        return self


class JailSubMount(ApiModel):
    """An extra volume mounted inside the jail, e.g. a fast scratch disk at /scratch."""

    name: DnsLabel
    mount_path: Annotated[str, Field(pattern=r"^/[^\n]*$", max_length=1024)]
    claim_name: DnsLabel
    read_only: bool = False

    @model_validator(mode="after")
    def _inside_jail(self) -> "JailSubMount":
        parts = self.mount_path.split("/")
        if ".." in parts or self.mount_path.rstrip("/") == "":
            raise ValueError(f"mountPath {self.mount_path!r} must be a path below the jail root without '..'")
        return self


class JailSpec(ApiModel):
    volume: JailVolume = Field(default_factory=JailVolume)
    sub_mounts: list[JailSubMount] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_sub_mounts(self) -> "JailSpec":
        for attr in ("name", "mount_path"):
            seen = [getattr(m, attr) for m in self.sub_mounts]
            dupes = sorted({v for v in seen if seen.count(v) > 1})
            if dupes:
                raise ValueError(f"subMounts: duplicate {attr} {dupes[0]!r}")
        return self


class PopulateJailSpec(ApiModel):
    overwrite: bool = Field(default=False, description="replace the jail's system files on the next run")
    backoff_limit: int = Field(default=2, ge=0, le=10)


class SecretRefs(ApiModel):
    """Existing Secrets to use instead of generating keys."""

    munge_key: Optional[DnsLabel] = None
    ssh_host_keys: Optional[DnsLabel] = None


# Keys the slurm.conf template always writes; a second copy in `extra` would silently win or clash.
MANAGED_SLURM_KEYS = frozenset(k.lower() for k in (
    "ClusterName", "SlurmctldHost", "ControlMachine", "SlurmUser", "SlurmctldPort", "SlurmdPort", "AuthType",
    "CryptoType", "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile",
    "SlurmctldLogFile", "SlurmdLogFile", "SlurmctldDebug", "SlurmdDebug", "CommunicationParameters",
    "SlurmctldParameters", "PrivateData", "TreeWidth", "ResumeTimeout", "PlugStackConfig", "SchedulerType",
    "SelectType", "SelectTypeParameters", "ProctrackType", "TaskPlugin", "ReturnToService", "SlurmdTimeout",
    "MessageTimeout", "KillWait", "MinJobAge", "MaxJobCount", "DefMemPerCPU", "GresTypes",
    "HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "NodeName", "PartitionName"))


class SlurmConfig(ApiModel):
    """Typed common slurm.conf keys; `extra` holds any other key verbatim."""

    scheduler_type: Literal["sched/backfill", "sched/builtin"] = "sched/backfill"
    select_type: Literal["select/cons_tres", "select/cons_res", "select/linear"] = "select/cons_tres"
    select_type_parameters: SlurmValue = "CR_Core_Memory"
    proctrack_type: Literal["proctrack/cgroup", "proctrack/linuxproc", "proctrack/pgid"] = "proctrack/cgroup"
    task_plugin: SlurmValue = "task/cgroup,task/affinity"
    return_to_service: int = Field(default=2, ge=0, le=2)
    slurmd_timeout: int = Field(default=300, ge=1)
    message_timeout: int = Field(default=60, ge=1, le=3600)
    kill_wait: int = Field(default=30, ge=0)
    min_job_age: int = Field(default=300, ge=0)
    max_job_count: int = Field(default=10000, ge=1)
    def_mem_per_cpu_mib: Optional[int] = Field(default=None, ge=1)
    debug_level: Literal["quiet", "fatal", "error", "info", "verbose", "debug", "debug2"] = "info"
    resume_timeout: int = Field(default=600, ge=1, description="seconds a worker pod may take to register")
    slurmctld_parameters: list[SlurmName] = Field(default_factory=list)
    extra: dict[SlurmName, SlurmValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _extra_keeps_off_managed_keys(self) -> "SlurmConfig":
        for key in self.extra:
            if key.lower() in MANAGED_SLURM_KEYS:
                raise ValueError(f"extra.{key} is set by soperator; use the typed field or leave it")
        return self


class PlugStack(ApiModel):
    pyxis: bool = False
    custom: list[SlurmValue] = Field(default_factory=list, description="extra plugstack.conf lines")


NodeStateName = Literal["IDLE", "ALLOC", "MIXED", "ANY", "CYCLE", "START_ONLY"]


class HealthCheck(ApiModel):
    """Slurm's HealthCheckProgram, run by every slurmd."""

    program: Optional[Annotated[str, Field(pattern=r"^/[^\s#]*$")]] = None
    interval: int = Field(default=0, ge=0, description="seconds; 0 disables the check")
    node_states: list[NodeStateName] = Field(default_factory=lambda: ["ANY"])

    @model_validator(mode="after")
    def _program_when_enabled(self) -> "HealthCheck":
        if self.interval > 0 and not self.program:
            raise ValueError("interval > 0 needs a program")
        return self


class SlurmClusterSpec(ApiModel):
    cluster_domain: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")] = "cluster.local"
    partitions: list[Partition] = Field(default_factory=lambda: [Partition(name="main", default=True)])
    images: Images = Field(default_factory=Images)
    controller: ControllerSpec = Field(default_factory=ControllerSpec)
    workers: WorkerSpec = Field(default_factory=WorkerSpec)
    login: LoginSpec = Field(default_factory=LoginSpec)
    jail: JailSpec = Field(default_factory=JailSpec)
    populate_jail: PopulateJailSpec = Field(default_factory=PopulateJailSpec)
    secrets: SecretRefs = Field(default_factory=SecretRefs)
    slurm_config: SlurmConfig = Field(default_factory=SlurmConfig)
    custom_cgroup_config: Optional[Annotated[str, Field(max_length=65536)]] = None
    plug_stack: PlugStack = Field(default_factory=PlugStack)
    health_check: HealthCheck = Field(default_factory=HealthCheck)

    @model_validator(mode="after")
    def _partitions_consistent(self) -> "SlurmClusterSpec":
        names = [p.name for p in self.partitions]
        if not names:
            raise ValueError("partitions: at least one partition is required")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"partitions: duplicate name {dupes[0]!r}")
        if sum(p.default for p in self.partitions) > 1:
            raise ValueError("partitions: only one partition may be the default")
        return self
