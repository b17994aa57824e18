/* Entering the jail. No Slurm symbols here: the SPANK glue is in plugin.c. */
#define _GNU_SOURCE
#include "jail.h"

#include <errno.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "soperator_restrict_task: unsupported architecture"
#endif

/* Step ids Slurm reserves (slurm.h); only the extern step must stay on the host: it holds the
 * job's cgroup/adopt logic and runs before any user code. */
#define STEP_EXTERN 0xfffffffcU

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int soperator_decide(int remote, uint32_t step_id, int argc, const char *const *argv, char *err,
                     size_t errlen)
{
    if (!remote || step_id == STEP_EXTERN)
        return SOPERATOR_SKIP;
    if (argc < 1 || argv[0] == NULL || argv[0][0] == '\0') {
        fail(err, errlen, "expected the jail path, then options (got %d arguments)", argc);
        return SOPERATOR_REFUSE;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], SOPERATOR_OPT_ALLOW_USERNS) != 0) {
            fail(err, errlen, "after the jail path only '" SOPERATOR_OPT_ALLOW_USERNS "' may follow, not '%s'",
                 argv[i]);
            return SOPERATOR_REFUSE;
        }
    }
    return SOPERATOR_ENTER;
}

int soperator_allows_userns(int argc, const char *const *argv)
{
    for (int i = 1; i < argc; i++)
        if (argv[i] != NULL && strcmp(argv[i], SOPERATOR_OPT_ALLOW_USERNS) == 0)
            return 1;
    return 0;
}

int soperator_check_jail(const char *jail, char *err, size_t errlen)
{
    struct stat st;
    char shell[PATH_MAX];

    if (jail == NULL || jail[0] != '/')
        return fail(err, errlen, "jail path must be absolute: '%s'", jail ? jail : "(null)");
    if (stat(jail, &st) != 0)
        return fail(err, errlen, "jail %s: %s", jail, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return fail(err, errlen, "jail %s is not a directory", jail);
    /* An empty mount point (volume not mounted, populate-jail never ran) must not pass. */
    if (snprintf(shell, sizeof(shell), "%s/bin/sh", jail) >= (int)sizeof(shell))
        return fail(err, errlen, "jail path too long");
    if (access(shell, X_OK) != 0)
        return fail(err, errlen, "jail %s holds no /bin/sh (%s): not populated?", jail, strerror(errno));
    return 0;
}

int soperator_enter_jail(const char *jail, char *err, size_t errlen)
{
    if (soperator_check_jail(jail, err, errlen) != 0)
        return -1;
    if (unshare(CLONE_NEWNS) != 0)
        return fail(err, errlen, "unshare(CLONE_NEWNS): %s", strerror(errno));
    /* Keep receiving the node's mounts, but never propagate ours back to the node. */
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
        return fail(err, errlen, "make / rslave: %s", strerror(errno));
    /* MS_MOVE needs the jail to be a mount point of its own. */
    if (mount(jail, jail, NULL, MS_BIND | MS_REC, NULL) != 0)
        return fail(err, errlen, "bind %s onto itself: %s", jail, strerror(errno));
    /* Setuid binaries and device nodes on the shared volume are inert in a job step. The binds
     * below the jail (/dev, the spool, sub-mounts) keep their own flags. */
    if (mount(NULL, jail, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) != 0)
        return fail(err, errlen, "remount %s nosuid,nodev: %s", jail, strerror(errno));
    if (chdir(jail) != 0)
        return fail(err, errlen, "chdir %s: %s", jail, strerror(errno));
    /* Move the jail over / and chroot into it, as switch_root does. Not pivot_root: containerd's
     * default seccomp profile refuses it even with CAP_SYS_ADMIN (measured on a real kubelet),
     * while it allows mount and chroot. The old root lies under the moved mount: ".." at the
     * jail's root leads back into the jail, so nothing of the node is reachable by path. */
    if (mount(".", "/", NULL, MS_MOVE, NULL) != 0)
        return fail(err, errlen, "move %s over /: %s", jail, strerror(errno));
    if (chroot(".") != 0)
        return fail(err, errlen, "chroot into %s: %s", jail, strerror(errno));
    if (chdir("/") != 0)
        return fail(err, errlen, "chdir / in jail: %s", strerror(errno));
    if (mkdir("/proc", 0555) != 0 && errno != EEXIST)
        return fail(err, errlen, "mkdir /proc in jail: %s", strerror(errno));
    /* hidepid=2: a user sees only their own processes, not other users' jobs and arguments. */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") != 0)
        return fail(err, errlen, "mount /proc in jail: %s", strerror(errno));
    return 0;
}

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
        return fail(err, errlen, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    if (!allow_userns && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
        return fail(err, errlen, "seccomp filter against user namespaces: %s", strerror(errno));
    return 0;
}

int soperator_restrict_task(int allow_userns, char *err, size_t errlen)
{
    /* The bounding set caps what any exec'd program, root's included, can hold. */
    for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
        if (!kept(cap) && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
            return fail(err, errlen, "drop capability %d from the bounding set: %s", cap, strerror(errno));
    }
    return soperator_restrict_sessions(allow_userns, err, errlen);
}
