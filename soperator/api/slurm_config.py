"""The parts of the spec that become Slurm config files: slurm.conf keys, partitions, cgroup.conf,
plugstack.conf and the health check. Every value is checked against its file's grammar here
(soperator/api/grammar.py), so no user string can add, drop or swallow a key in a rendered file."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, field_validator
from typing_extensions import Annotated

from soperator.api.common import ApiModel, cel, refuse_duplicates, unique_rule
from soperator.api.fields import MAX_SAFE_INTEGER, QUALIFIED_NAME_PATTERN
from soperator.api.grammar import PlugStackLine, SlurmListItem, SlurmName, SlurmTime, extra_keys
from soperator.api.paths import WORLD_WRITABLE, ProgramPath, world_writable

# Every key the slurm.conf template writes (a test renders the template and checks), and keys that
# would break the design: slurmd must run as root (the jail plugin enters the jail with unshare, mount
# and chroot: spank_chroot/jail.c), auth and credentials are ours, and
# node, partition, node-set and include lines cannot be smuggled in as a value.
MANAGED_SLURM_KEYS = frozenset(k.lower() for k in (
    "ClusterName", "SlurmctldHost", "ControlMachine", "ControlAddr", "BackupController", "BackupAddr",
    "SlurmUser", "SlurmdUser", "SlurmctldPort", "SlurmdPort", "AuthType", "AuthAltTypes", "AuthAltParameters",
    "AuthInfo", "CryptoType", "CredType", "JobCredentialPrivateKey", "JobCredentialPublicCertificate",
    "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile",
    "SlurmdLogFile", "SlurmctldDebug", "SlurmdDebug", "MailProg", "CommunicationParameters",
    "SlurmctldParameters", "PrivateData", "TreeWidth", "ResumeTimeout", "PlugStackConfig", "SchedulerType",
    # the login's process cap must not reach jobs; the two keys exclude each other in Slurm
    "PropagateResourceLimits", "PropagateResourceLimitsExcept",
    "SelectType", "SelectTypeParameters", "ProctrackType", "TaskPlugin", "ReturnToService", "SlurmdTimeout",
    "MessageTimeout", "KillWait", "MinJobAge", "MaxJobCount", "DefMemPerCPU", "GresTypes",
    "HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "HealthCheckTimeout", "NodeName", "PartitionName",
    "NodeSet", "DownNodes", "FrontendName", "Include", "MaxNodeCount",
    # slurmctld's metrics are the operator's to read and serve (ignore_private_data would open them to
    # every pod that reaches slurmctld's port)
    "MetricsType", "MetricsParameters", "MetricsAuthUsers", "SlurmctldHttpAuthParameters",
    # spec.accounting's
    "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort", "AccountingStorageUser",
    "AccountingStoragePass", "AccountingStorageEnforce",
    # keys of the node and NodeSet lines, which a global line would redefine or break
    "CPUs", "RealMemory", "Gres", "Feature", "Features", "State"))
# A partition's power saving would win over the operator's for its nodes (Slurm takes the narrower
# scope), and its Topology must name one spec.topology writes.
MANAGED_PARTITION_KEYS = frozenset(k.lower() for k in ("PartitionName", "Nodes", "Default", "MaxTime", "State",
                                                       "SuspendTime", "SuspendTimeout", "PowerDownOnIdle",
                                                       "Topology"))
MANAGED_CGROUP_KEYS = frozenset(k.lower() for k in (
    "CgroupPlugin", "IgnoreSystemd", "ConstrainCores", "ConstrainRAMSpace", "ConstrainDevices", "Include"))
# Plugins soperator places itself, in the order that keeps the jail first.
MANAGED_PLUGINS = ("spank_chroot.so", "spank_pyxis.so")


# A node set's name (spec.nodeSets[].name), wherever another field names one.
NodeSetName = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$")]


class Partition(ApiModel):
    model_config = ConfigDict(json_schema_extra=cel(
        ("self.name.lowerAscii() != 'default'", "name: DEFAULT is Slurm's defaults line, not a partition")))

    name: SlurmName
    node_sets: list[NodeSetName] = Field(
        default_factory=list, max_length=32, description="the node sets (spec.nodeSets names) whose workers "
        "this partition spans; none: every node set", json_schema_extra=cel(
            ("self.all(a, self.exists_one(b, b == a))", "a node set is listed twice")))
    default: bool = False
    max_time: SlurmTime = "INFINITE"
    state: Literal["UP", "DOWN", "DRAIN", "INACTIVE"] = "UP"
    extra: extra_keys(MANAGED_PARTITION_KEYS, "partition") = Field(default_factory=dict)

    @field_validator("node_sets")
    @classmethod
    def _once_each(cls, node_sets: list[str]) -> list[str]:
        refuse_duplicates(node_sets)
        return node_sets

    @field_validator("name")
    @classmethod
    def _not_defaults_line(cls, name: str) -> str:
        if name.lower() == "default":
            raise ValueError("DEFAULT is Slurm's defaults line, not a partition")
        return name


# SelectTypeParameters slurmctld 24.11 takes (read_config.c, compared without regard to case): exactly
# one way to count what a job gets (cons_tres needs CPUs, cores or sockets), then any of the flags.
SELECT_RESOURCES = ("CR_CPU", "CR_CPU_Memory", "CR_Core", "CR_Core_Memory", "CR_Socket", "CR_Socket_Memory")
SELECT_FLAGS = ("CR_ONE_TASK_PER_CORE", "CR_CORE_DEFAULT_DIST_BLOCK", "CR_LLN", "CR_Pack_Nodes", "LL_SHARED_GRES",
                "MULTIPLE_SHARING_GRES_PJ", "ENFORCE_BINDING_GRES", "ONE_TASK_PER_SHARING_GRES")
UINT16_MAX, UINT32_MAX = 2**16 - 1, 2**32 - 1
# No pod is scheduled, pulls its image, starts slurmd and registers in less.
MIN_RESUME_TIMEOUT = 30
# slurmctld quietly lowers a larger MaxJobCount to its job id range (MaxJobId 0x03ff0000 by default).
MAX_JOB_COUNT = 0x03FF0000


def _select_parameters(value: str) -> str:
    tokens = value.split(",")
    known = {t.lower(): t for t in SELECT_RESOURCES + SELECT_FLAGS + ("CR_Memory",)}
    for token in tokens:
        if token.lower() not in known:
            raise ValueError(f"{token!r} is not a SelectTypeParameters value (one of {', '.join(SELECT_RESOURCES)}, "
                             f"then any of {', '.join(SELECT_FLAGS)})")
    counts = [t for t in tokens if t.lower() in {r.lower() for r in SELECT_RESOURCES + ("CR_Memory",)}]
    if len(counts) != 1 or counts[0].lower() == "cr_memory":
        raise ValueError(f"needs exactly one of {', '.join(SELECT_RESOURCES)} (select/cons_tres counts CPUs, "
                         f"cores or sockets; '_Memory' adds memory), not {', '.join(counts) or 'none'}")
    if "cr_one_task_per_core" in value.lower() and counts[0].lower().startswith("cr_cpu"):
        raise ValueError("CR_ONE_TASK_PER_CORE does not go with CR_CPU*: Slurm refuses it (use CR_Core*)")
    return value


_SELECT_TOKEN = "|".join(t for t in SELECT_RESOURCES + SELECT_FLAGS)
SelectParameters = Annotated[str, Field(max_length=256, json_schema_extra=cel((
    f"self.split(',').all(t, t.matches('^(?i)({_SELECT_TOKEN})$')) && "
    f"self.split(',').filter(t, t.matches('^(?i)({'|'.join(SELECT_RESOURCES)})$')).size() == 1",
    f"one of {', '.join(SELECT_RESOURCES)}, then any of {', '.join(SELECT_FLAGS)}, separated by ','"))),
    AfterValidator(_select_parameters)]


class SlurmConfig(ApiModel):
    """Typed common slurm.conf keys; `extra` holds any other key verbatim. Numbers stay within the C
    types slurmctld reads them into (it refuses a larger one and does not start)."""

    scheduler_type: Literal["sched/backfill", "sched/builtin"] = "sched/backfill"
    # Workers are dynamic nodes: Slurm takes MaxNodeCount with cons_tres only (cons_res is gone since 23.11).
    select_type: Literal["select/cons_tres"] = "select/cons_tres"
    select_type_parameters: SelectParameters = "CR_Core_Memory"
    proctrack_type: Literal["proctrack/cgroup", "proctrack/linuxproc", "proctrack/pgid"] = "proctrack/cgroup"
    task_plugin: Annotated[str, Field(max_length=256, pattern=r"^task/[a-z_]+(,task/[a-z_]+)*$")] = \
        "task/cgroup,task/affinity"
    return_to_service: int = Field(default=2, ge=0, le=2)
    slurmd_timeout: int = Field(default=300, ge=1, le=UINT16_MAX)
    message_timeout: int = Field(default=60, ge=1, le=100, description="seconds; slurmctld calls more than 100 "
                                 "too high for fault tolerance")
    kill_wait: int = Field(default=30, ge=0, le=UINT16_MAX)
    min_job_age: int = Field(default=300, ge=2, le=UINT32_MAX, description="at least 2: slurmctld raises less")
    max_job_count: int = Field(default=10000, ge=1, le=MAX_JOB_COUNT)
    def_mem_per_cpu_mib: Optional[int] = Field(default=None, ge=1, le=MAX_SAFE_INTEGER)
    debug_level: Literal["quiet", "fatal", "error", "info", "verbose", "debug", "debug2"] = "info"
    resume_timeout: int = Field(default=600, ge=MIN_RESUME_TIMEOUT, le=UINT16_MAX, description="seconds a worker pod "
                                "may take to register (at least 30: scheduled, its image pulled, slurmd started)")
    max_node_count: int = Field(
        default=1024, ge=1, le=65536,
        description="room slurmctld keeps for dynamic nodes: workers scale within it with no slurmctld restart")
    slurmctld_parameters: list[SlurmListItem] = Field(default_factory=list, max_length=64)
    extra: extra_keys(MANAGED_SLURM_KEYS, "slurm.conf") = Field(default_factory=dict)


def uses_cgroups(cfg: "SlurmConfig") -> bool:
    """Whether a plugin slurm.conf names works through cgroups (process tracking, task binding or
    accounting): if none does, slurmd is better off without the cgroup plugin (cgroup.conf.j2)."""
    gather = {k.lower(): v for k, v in cfg.extra.items()}.get("jobacctgathertype", "")
    return (cfg.proctrack_type == "proctrack/cgroup" or "task/cgroup" in cfg.task_plugin.split(",")
            or gather == "jobacct_gather/cgroup")


class CgroupConfig(ApiModel):
    """cgroup.conf: soperator writes the plugin and the constraints; `extra` adds other keys."""

    extra: extra_keys(MANAGED_CGROUP_KEYS, "cgroup.conf") = Field(default_factory=dict)


class PyxisPlugStack(ApiModel):
    """Pyxis's settings, one for the whole cluster: slurmd reads plugstack.conf from slurmctld."""

    mount_images: bool = Field(
        default=False, description="start a container from a squashfs image by mounting it (squashfuse, a "
        "kernel overlay on top: writes go to memory) instead of unpacking it with `enroot create`. Workers of "
        "node sets with Pyxis then ask for /dev/fuse (resource soperator.dev/fuse, which the operator chart's "
        "fuseDevicePlugin offers): without it their pods do not start. Named containers (--container-name) "
        "are still unpacked, as Pyxis does")


class PlugStack(ApiModel):
    pyxis: PyxisPlugStack = Field(default_factory=PyxisPlugStack)
    allow_user_namespaces: bool = Field(
        default=False, description="let job steps create user namespaces (rootless containers need them); "
                                   "off: the chroot plugin's seccomp filter refuses them")
    custom: list[PlugStackLine] = Field(
        default_factory=list, max_length=32,
        description="more plugstack.conf lines ('required|optional /path/plugin.so args'), after soperator's",
        json_schema_extra=cel((f"self.all(l, {' && '.join(f'!l.contains({p!r})' for p in MANAGED_PLUGINS)})",
                               "custom lines may not load a plugin soperator places itself"),
                              (f"self.all(l, !l.matches('^(required|optional) ({'|'.join(WORLD_WRITABLE)})/'))",
                               "custom lines may not load a plugin from a directory every user can write")))

    @field_validator("custom")
    @classmethod
    def _not_ours(cls, custom: list[str]) -> list[str]:
        for index, line in enumerate(custom):
            if any(p in line for p in MANAGED_PLUGINS):
                raise ValueError(f"[{index}] loads a plugin soperator places itself (the jail comes first)")
            where = world_writable(line.split(" ")[1])
            if where:
                raise ValueError(f"[{index}] loads a plugin from {where}, which every user can write: slurmd and "
                                 "slurmstepd (root) would load what any user put there")
        return custom


# A Kubernetes condition type: a qualified name (metav1.Condition's rule).
NodeConditionType = Annotated[str, Field(min_length=1, max_length=316, pattern=QUALIFIED_NAME_PATTERN)]
NodeStateName = Literal["IDLE", "ALLOC", "MIXED", "ANY", "CYCLE", "START_ONLY", "REBOOT_ONLY"]
# Run only when slurmd starts, or only after a reboot: Slurm 26.05 stops (fatal) when either is given
# with any other state.
ALONE_STATES = ("START_ONLY", "REBOOT_ONLY")


class ActiveCheck(ApiModel):
    """A check run as a Slurm job, alone on each idle node of its node sets, once every everySeconds."""

    name: Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$")]
    program: ProgramPath = Field(description="a program in the jail, run as root in a job step (confined as one): "
                                 "exit 0 passes; anything else fails, its last line the reason")
    every_seconds: int = Field(ge=10, le=31_536_000, description="how often a round starts (required: a check "
                               "with no schedule never runs)")
    node_sets: list[NodeSetName] = \
        Field(default_factory=list, max_length=16, description="where it runs (spec.nodeSets names); none: every "
              "node set", json_schema_extra=cel(("self.all(a, self.exists_one(b, b == a))",
                                                 "a node set is listed twice")))
    gpus_only: bool = Field(default=False, description="only on node sets with GPUs (nodeSets[].gpus), e.g. "
                            "nvidia-smi or DCGM diagnostics")
    action: Literal["Drain", "Comment"] = Field(default="Drain", description="on failure: drain the node with the "
                                                "reason, or only set it as the node's comment")
    time_limit_minutes: int = Field(default=10, ge=1, le=1440, description="its job's time limit: a check that "
                                    "runs longer fails (TIMEOUT)")

    @field_validator("node_sets")
    @classmethod
    def _once_each(cls, node_sets: list[str]) -> list[str]:
        refuse_duplicates(node_sets)
        return node_sets


class HealthCheck(ApiModel):
    """Slurm's HealthCheckProgram, run by every slurmd (a program needs an interval, and the reverse),
    and the Kubernetes node conditions that drain the workers on a node."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("has(self.program) == (has(self.interval) && self.interval > 0)",
         "program and a positive interval go together")))

    program: Optional[ProgramPath] = Field(
        default=None, description="a program in the jail (e.g. NHC's /usr/sbin/nhc), which every worker's slurmd "
        "runs there as root, confined as a job step is (no CAP_SYS_ADMIN), never on the node's root. Its exit code "
        "is the verdict: non-zero drains the node, its last line the reason; zero undoes only that drain. It may "
        "also drain its node itself (scontrol update ... state=drain), a drain soperator never undoes")
    interval: int = Field(default=0, ge=0, le=UINT16_MAX, description="seconds; 0 with no program: no health check")
    kubernetes_node_conditions: list[NodeConditionType] = Field(
        default_factory=list, max_length=16, description="Kubernetes node condition types (e.g. node-problem-"
        "detector's KernelDeadlock, ReadonlyFilesystem, or a GPU monitor's): while one is True on a node, the Slurm "
        "nodes of the workers there are drained with its type and message; once it clears, that drain is undone",
        json_schema_extra=cel(("self.all(a, self.exists_one(b, b == a))", "a condition type is listed twice"),
                              ("!self.exists(t, t == 'Ready')", "Ready is followed already (a node not ready drains "
                                                                "its workers)")))
    node_states: list[NodeStateName] = Field(default_factory=lambda: ["ANY"], min_length=1, max_length=6,
                                             json_schema_extra=cel((
        f"size(self) == 1 || !self.exists(s, s in {list(ALONE_STATES)})",
        f"{' and '.join(ALONE_STATES)} each stand alone (Slurm refuses to start otherwise)")))

    @field_validator("node_states")
    @classmethod
    def _alone_states_stand_alone(cls, states: list[str]) -> list[str]:
        alone = sorted(set(states) & set(ALONE_STATES))
        if alone and len(states) > 1:
            raise ValueError(f"{alone[0]} stands alone: Slurm refuses to start with it and any other state")
        return states

    active: list[ActiveCheck] = Field(
        default_factory=list, max_length=16, description="checks run as Slurm jobs on idle nodes, never beside "
        "a user's job; results in status.healthChecks and in events",
        json_schema_extra=cel(unique_rule("name", "duplicate check name")))

    @field_validator("active")
    @classmethod
    def _names_once(cls, active: list[ActiveCheck]) -> list[ActiveCheck]:
        refuse_duplicates([c.name for c in active], "duplicate check name {!r}")
        return active

    @field_validator("kubernetes_node_conditions")
    @classmethod
    def _conditions(cls, types: list[str]) -> list[str]:
        refuse_duplicates(types, "{!r} is listed twice")
        if "Ready" in types:
            raise ValueError("Ready is followed already (a node not ready drains its workers)")
        return types

    @field_validator("interval")
    @classmethod
    def _goes_with_program(cls, interval: int, info: ValidationInfo) -> int:
        program = info.data.get("program")
        if interval > 0 and not program:
            raise ValueError("interval > 0 needs a program")
        if program and interval == 0:
            raise ValueError("the program needs interval > 0 (0 would silently disable it)")
        return interval
