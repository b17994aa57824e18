/* Entering the jail. No Slurm symbols here: the SPANK glue is in plugin.c. */
#define _GNU_SOURCE
#include "jail.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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
    if (argc != 1 || argv[0] == NULL || argv[0][0] == '\0') {
        fail(err, errlen, "expected exactly one argument, the jail path (got %d)", argc);
        return SOPERATOR_REFUSE;
    }
    return SOPERATOR_ENTER;
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
    /* pivot_root needs the new root to be a mount point. */
    if (mount(jail, jail, NULL, MS_BIND | MS_REC, NULL) != 0)
        return fail(err, errlen, "bind %s onto itself: %s", jail, strerror(errno));
    if (chdir(jail) != 0)
        return fail(err, errlen, "chdir %s: %s", jail, strerror(errno));
    /* pivot_root(".", ".") stacks the old root on the new one; detaching "." then drops it,
     * so no old-root directory is needed inside the jail. */
    if (syscall(SYS_pivot_root, ".", ".") != 0)
        return fail(err, errlen, "pivot_root into %s: %s", jail, strerror(errno));
    if (umount2(".", MNT_DETACH) != 0)
        return fail(err, errlen, "detach old root: %s", strerror(errno));
    if (chdir("/") != 0)
        return fail(err, errlen, "chdir / in jail: %s", strerror(errno));
    if (mkdir("/proc", 0555) != 0 && errno != EEXIST)
        return fail(err, errlen, "mkdir /proc in jail: %s", strerror(errno));
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        return fail(err, errlen, "mount /proc in jail: %s", strerror(errno));
    return 0;
}
