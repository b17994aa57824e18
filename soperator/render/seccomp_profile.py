"""The seccomp profile of a Pyxis node set's workers (kubelet `Localhost`, OCI seccomp JSON).

The runtime's default profile refuses pivot_root, which enroot enters every container with, whatever
the capabilities. This profile is that default for a worker's capability set plus what enroot needs
(measured: pivot_root alone), written as an allowlist: every syscall of LINUX_SYSCALLS not refused
below. tests/kube/test_seccomp_profile.py holds it to be no wider than the default containerd gives
a plain worker on the real node, pivot_root aside. Job tasks get the chroot plugin's own filter on
top (io_uring, bpf, keyrings, userfaultfd refused).

The operator chart installs it on every node (templates/seccomp-profiles.yaml) under a name that holds
its digest: a changed profile is a new file, so releases of different versions never overwrite each
other's, and the worker template changes with it (its pods roll, drained first). `soperator
seccomp-profile` prints it."""
from __future__ import annotations

import errno
import functools
import hashlib
import json

from soperator.render.common import Obj
from soperator.render.linux_syscalls import LINUX_SYSCALLS

# The directory under the kubelet's seccomp directory (<root-dir>/seccomp/) that the chart fills.
PROFILE_DIR = "soperator"

# What enroot needs beyond the runtime's default (it pivot_roots into each container's root).
ENROOT_NEEDS = frozenset({"pivot_root"})

# Refused with EPERM, as a process without the capability gets them.
REFUSED = frozenset({
    # The node's kernel, clock, devices, swap and accounting; the runtime's default refuses them too.
    "init_module", "finit_module", "delete_module", "create_module", "query_module", "get_kernel_syms",
    "reboot", "kexec_load", "kexec_file_load", "settimeofday", "clock_settime", "iopl", "ioperm", "swapon",
    "swapoff", "acct", "vhangup", "open_by_handle_at",
    # The runtime's default refuses these to a container without CAP_SYS_PTRACE or CAP_SYS_NICE: other
    # processes' memory, NUMA policies and page moves; and (containerd 1.6) keyrings. Workers with
    # task/affinity hold CAP_SYS_NICE (for sched_setaffinity) but Slurm and enroot use none of these.
    "kcmp", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "userfaultfd",
    "mbind", "get_mempolicy", "set_mempolicy", "set_mempolicy_home_node", "move_pages", "migrate_pages",
    "add_key", "keyctl", "request_key",
    # The default allows these to a container with CAP_SYS_ADMIN, which workers hold for the jail's
    # mounts; neither Slurm nor enroot uses them: quotas, the kernel's log and cookies, file handles,
    # the pod's host names, fanotify over whole mounts.
    "quotactl", "quotactl_fd", "syslog", "lookup_dcookie", "name_to_handle_at", "sethostname",
    "setdomainname", "fanotify_init",
})
# Refused with ENOSYS, as a kernel built without them answers (liburing then falls back): io_uring,
# which containerd's own default has dropped since 2.0 after a run of local privilege escalations.
NOT_OFFERED = frozenset({"io_uring_setup", "io_uring_enter", "io_uring_register"})
# Left to the default answer, ENOSYS, as a kernel without them gives: obsolete or never implemented.
ABSENT = frozenset({"afs_syscall", "tuxcall", "security", "putpmsg", "getpmsg", "vserver", "nfsservctl", "uselib",
                    "ustat", "sysfs", "_sysctl", "epoll_ctl_old", "epoll_wait_old"})
# personality(2) only for the personas the runtime's default allows: Linux, 32-bit Linux, a 2.6
# uname, and the query; so not ADDR_NO_RANDOMIZE and the like.
PERSONAS = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
ARCHITECTURES = ("SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64")
# socket(2) for every address family Linux defines (AF_UNIX 1 to AF_MCTP 45) but two, as containerd
# 2's default: AF_ALG (38), the kernel's crypto API, no job needs and a run of exploits went through;
# AF_VSOCK (40) reaches any virtual machine on the node, whatever the network namespace.
SOCKET_FAMILIES = frozenset(range(1, 46)) - {38, 40}


def pyxis_worker_profile() -> Obj:
    """Unknown syscalls (newer than LINUX_SYSCALLS) answer ENOSYS: glibc then falls back to the older
    call (fchmodat2 to fchmodat), where EPERM would be taken as a refusal. So do personality(2) with
    another persona, NOT_OFFERED and ABSENT. A syscall of another ABI (i386, x32) matches no listed
    architecture: libseccomp's answer to those is to kill the thread."""
    allowed = LINUX_SYSCALLS - REFUSED - NOT_OFFERED - ABSENT - {"personality", "socket"}
    assert ENROOT_NEEDS <= allowed and (REFUSED | NOT_OFFERED | ABSENT) <= LINUX_SYSCALLS
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.ENOSYS,
        "architectures": list(ARCHITECTURES),
        "syscalls": [
            {"names": sorted(allowed), "action": "SCMP_ACT_ALLOW"},
            *(_first_argument("personality", "SCMP_CMP_EQ", persona) for persona in PERSONAS),
            *_socket_rules(),
            {"names": sorted(REFUSED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
        ],
    }


def _first_argument(name: str, op: str, value: int) -> Obj:
    return {"names": [name], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": value, "op": op}]}


def _socket_rules() -> list[Obj]:
    """The families from AF_UNIX up to the first one left out as one `<` rule, the rest one `==` each.
    runc takes two comparisons of one argument as alternatives, so a range needs a single bound; the
    same rules as containerd's default, so the real node's test can compare them rule by rule."""
    first_gap = min(set(range(1, max(SOCKET_FAMILIES) + 2)) - SOCKET_FAMILIES)
    return [_first_argument("socket", "SCMP_CMP_LT", first_gap),
            *(_first_argument("socket", "SCMP_CMP_EQ", family) for family in sorted(SOCKET_FAMILIES)
              if family > first_gap)]


@functools.cache
def profile_json() -> str:
    """The file the operator chart ships (charts/slurm-operator/files/seccomp/)."""
    return json.dumps(pyxis_worker_profile(), indent=1) + "\n"


def profile_file_name() -> str:
    return f"pyxis-worker-{hashlib.sha256(profile_json().encode()).hexdigest()[:12]}.json"


def pyxis_worker_profile_path() -> str:
    """The workers' `localhostProfile`: where the chart's DaemonSet puts the file."""
    return f"{PROFILE_DIR}/{profile_file_name()}"
