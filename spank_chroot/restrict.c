/* What a task and a login session may still do: capabilities and seccomp filters, set just before
 * the user's program is exec'd (or, for sshd, before it starts sessions). No Slurm symbols here. */
#define _GNU_SOURCE
#include "fail.h"
#include "jail.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "soperator_restrict_task: unsupported architecture"
#endif

/* Refuse the syscalls that create a user namespace: unshare/clone with CLONE_NEWUSER (EPERM), and
 * clone3, whose flags a filter cannot read (ENOSYS: glibc then falls back to clone). Syscalls of
 * another ABI (i386 via int 0x80, x32) could bypass the numbers below, so they all fail. */
static struct sock_filter no_userns_filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 9),             /* else -> 11 */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 7, 0),             /* x32 -> 11 */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 6, 0),             /* -> 11 */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, 1, 0),            /* -> 7 */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 2),              /* -> 7, else -> 9 */
    /* 7: the flags are the first argument of both; CLONE_NEWUSER lies in its low 32 bits. */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 1, 0),          /* -> 10, else -> 9 */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                       /* 9 */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),   /* 10 */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),  /* 11 */
};

/* For the image cache's imports (root, jail_enroot.py), after the work directory is the only writable
 * mount: no other view of anything. A mount may make a new file system (enroot's overlay, in a
 * namespace of its own) or change propagation, never remount, bind or move one; nothing is unmounted,
 * attached through the new mount API, pivoted, chrooted into or entered (setns). Another ABI: ENOSYS. */
#define REFUSED_MOUNT_FLAGS (MS_REMOUNT | MS_BIND | MS_MOVE)
static struct sock_filter import_filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 18),            /* else -> 20 */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 16, 0),            /* x32 -> 20 */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_umount2, 14, 0),           /* -> 19 */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_move_mount, 13, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_open_tree, 12, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fsopen, 11, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fsconfig, 10, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fsmount, 9, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fspick, 8, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mount_setattr, 7, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pivot_root, 6, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_chroot, 5, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setns, 4, 0),             /* -> 19 */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mount, 0, 2),              /* else -> 18 */
    /* 16: mount's flags (its fourth argument; these bits lie in its low 32 bits). */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, REFUSED_MOUNT_FLAGS, 1, 0),    /* -> 19, else -> 18 */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                       /* 18 */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),   /* 19 */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),  /* 20 */
};

/* Refused in every task and login session, user namespaces allowed or not: kernel interfaces a job
 * has no use for and that keep giving local privilege escalations (io_uring, bpf, the keyring,
 * userfaultfd). ENOSYS, as a kernel without them answers: libraries fall back (liburing does). */
static const unsigned refused_native[] = {__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
                                          __NR_bpf, __NR_keyctl, __NR_add_key, __NR_request_key,
                                          __NR_userfaultfd};
/* The same through the 32-bit ABI the kernel keeps beside the native one: i386 (int 0x80) on x86_64,
 * numbers from asm/unistd_32.h; 32-bit ARM (EABI) on aarch64, from the kernel's arm syscall table. */
#if defined(__x86_64__)
#define AUDIT_ARCH_COMPAT AUDIT_ARCH_I386
static const unsigned refused_compat[] = {425, 426, 427, 357, 288, 286, 287, 374};
#else
#define AUDIT_ARCH_COMPAT AUDIT_ARCH_ARM
static const unsigned refused_compat[] = {425, 426, 427, 386, 311, 309, 310, 388};
#endif
_Static_assert(sizeof(refused_compat) == sizeof(refused_native), "one compat number for each native one");

#define FILTER_MAX 32

/* A filter that, for syscalls of `arch`, answers ENOSYS to the numbers in `nrs` (after clearing
 * `clear`, the x32 bit, from the number) and lets everything else through. */
static size_t refusing_filter(struct sock_filter *f, uint32_t arch, uint32_t clear, const unsigned *nrs,
                              size_t count)
{
    size_t n = 0;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    f[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~clear);
    /* Compare i jumps over the count-1-i compares after it and the ALLOW below: to the ENOSYS. */
    for (size_t i = 0; i < count; i++)
        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i], (unsigned char)(count - i), 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
    return n;
}

static int install(struct sock_filter *f, size_t len, const char *what, char *err, size_t errlen)
{
    struct sock_fprog prog = {.len = (unsigned short)len, .filter = f};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
        return soperator_fail(err, errlen, "seccomp filter %s: %s", what, strerror(errno));
    return 0;
}

static int refuse_risky_interfaces(char *err, size_t errlen)
{
    struct sock_filter f[FILTER_MAX];
    const size_t count = sizeof(refused_native) / sizeof(refused_native[0]);
    _Static_assert(sizeof(refused_native) / sizeof(refused_native[0]) + 7 <= FILTER_MAX, "filter fits");
    /* x32 (x86_64 only) shares the native arch and marks its numbers with bit 30: cleared first. */
    const uint32_t x32 = NATIVE_ARCH == AUDIT_ARCH_X86_64 ? 0x40000000U : 0;
    if (install(f, refusing_filter(f, NATIVE_ARCH, x32, refused_native, count),
                "against io_uring, bpf, keyrings and userfaultfd", err, errlen) != 0)
        return -1;
    return install(f, refusing_filter(f, AUDIT_ARCH_COMPAT, 0, refused_compat, count),
                   "against io_uring, bpf, keyrings and userfaultfd (32-bit ABI)", err, errlen);
}

/* What a task may keep, even root's: owning, reading and signalling its files and processes, and
 * switching users. Not CAP_SYS_ADMIN (mount, unshare), nor the rest the node needs. */
static const int kept_capabilities[] = {CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL,
                                        CAP_SETGID, CAP_SETUID, CAP_NET_BIND_SERVICE};

static int kept(int cap)
{
    for (size_t i = 0; i < sizeof(kept_capabilities) / sizeof(kept_capabilities[0]); i++)
        if (kept_capabilities[i] == cap)
            return 1;
    return 0;
}

int soperator_restrict_sessions(int allow_userns, char *err, size_t errlen)
{
    struct sock_fprog prog = {
        .len = (unsigned short)(sizeof(no_userns_filter) / sizeof(no_userns_filter[0])),
        .filter = no_userns_filter,
    };

    /* No exec after this gains privileges: setuid-root binaries and file capabilities do nothing. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return soperator_fail(err, errlen, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    if (!allow_userns && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
        return soperator_fail(err, errlen, "seccomp filter against user namespaces: %s", strerror(errno));
    return refuse_risky_interfaces(err, errlen);
}

/* Root's exec takes its permitted set from the inheritable set as well as the bounding set (the
 * kernel treats root's program as holding every file capability), and the ambient set survives any
 * exec: both are trimmed too, or a runtime that leaves them full would hand root its powers back. */
static int trim_inheritable_and_ambient(char *err, size_t errlen)
{
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    if (syscall(SYS_capget, &header, data) != 0)
        return soperator_fail(err, errlen, "capget: %s", strerror(errno));
    for (int cap = 0; cap < 32 * _LINUX_CAPABILITY_U32S_3; cap++)
        if (!kept(cap))
            data[cap / 32].inheritable &= ~(1U << (cap % 32));
    if (syscall(SYS_capset, &header, data) != 0)
        return soperator_fail(err, errlen, "capset (inheritable set): %s", strerror(errno));
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
        return soperator_fail(err, errlen, "clear the ambient capabilities: %s", strerror(errno));
    return 0;
}

/* The bounding set caps what any exec'd program, root's included, can hold: the allowlist, plus
 * `also` (-1 for none); then the inheritable and ambient sets likewise. */
static int limit_capabilities(int also, char *err, size_t errlen)
{
    for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
        if (!kept(cap) && cap != also && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 &&
            prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
            return soperator_fail(err, errlen, "drop capability %d from the bounding set: %s", cap, strerror(errno));
    }
    return trim_inheritable_and_ambient(err, errlen);
}

int soperator_enter_session(const char *jail, char *err, size_t errlen)
{
    if (soperator_enter_jail(jail, err, errlen) != 0)
        return -1;
    return limit_capabilities(-1, err, errlen);
}

int soperator_restrict_task(int allow_userns, char *err, size_t errlen)
{
    /* Where tasks may create user namespaces (Pyxis), root keeps CAP_SETFCAP if the worker has it (only
     * user-namespaced Pyxis workers do, over their own namespace): enroot maps root's container to
     * root, which Linux 5.12+ allows only to a creator holding it. */
    if (limit_capabilities(allow_userns ? CAP_SETFCAP : -1, err, errlen) != 0)
        return -1;
    return soperator_restrict_sessions(allow_userns, err, errlen);
}

int soperator_restrict_import(char *err, size_t errlen)
{
    return install(import_filter, sizeof(import_filter) / sizeof(import_filter[0]),
                   "against new views of mounts", err, errlen);
}
