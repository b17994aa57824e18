/* Deciding and entering the jail. No Slurm symbols here: the SPANK glue is in plugin.c. */
#define _GNU_SOURCE
#include "jail.h"
#include "fail.h"
#include "job_dirs.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Step ids Slurm reserves (slurm.h); only the extern step must stay on the host: it holds the
 * job's cgroup/adopt logic and runs before any user code. */
#define STEP_EXTERN 0xfffffffcU

static int starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* The directory a job directory option names (job_tmp=/DIR, job_shm=/DIR); NULL for any other argument. */
static const char *dir_option(const char *arg)
{
    static const char *const prefixes[] = {SOPERATOR_OPT_JOB_TMP, SOPERATOR_OPT_JOB_SHM};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (starts_with(arg, prefixes[i]))
            return arg + strlen(prefixes[i]);
    return NULL;
}

int soperator_decide(int remote, uint32_t step_id, int argc, const char *const *argv, char *err,
                     size_t errlen)
{
    if (!remote || step_id == STEP_EXTERN)
        return SOPERATOR_SKIP;
    if (argc < 1 || argv[0] == NULL || argv[0][0] == '\0') {
        soperator_fail(err, errlen, "expected the jail path, then options (got %d arguments)", argc);
        return SOPERATOR_REFUSE;
    }
    for (int i = 1; i < argc; i++) {
        const char *dir = dir_option(argv[i]);
        int known = dir != NULL ? dir[0] == '/' : strcmp(argv[i], SOPERATOR_OPT_ALLOW_USERNS) == 0;
        if (!known) {
            soperator_fail(err, errlen, "after the jail path only '" SOPERATOR_OPT_ALLOW_USERNS "', '"
                           SOPERATOR_OPT_JOB_TMP "/DIR' and '" SOPERATOR_OPT_JOB_SHM "/DIR' may follow, not '%s'",
                           argv[i]);
            return SOPERATOR_REFUSE;
        }
    }
    return SOPERATOR_ENTER;
}

const char *soperator_option(int argc, const char *const *argv, const char *prefix)
{
    for (int i = 1; i < argc; i++)
        if (argv[i] != NULL && starts_with(argv[i], prefix))
            return argv[i] + strlen(prefix);
    return NULL;
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
        return soperator_fail(err, errlen, "jail path must be absolute: '%s'", jail ? jail : "(null)");
    if (stat(jail, &st) != 0)
        return soperator_fail(err, errlen, "jail %s: %s", jail, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return soperator_fail(err, errlen, "jail %s is not a directory", jail);
    /* An empty mount point (volume not mounted, populate-jail never ran) must not pass. */
    if (snprintf(shell, sizeof(shell), "%s/bin/sh", jail) >= (int)sizeof(shell))
        return soperator_fail(err, errlen, "jail path too long");
    if (access(shell, X_OK) != 0)
        return soperator_fail(err, errlen, "jail %s holds no /bin/sh (%s): not populated?", jail, strerror(errno));
    return 0;
}

int soperator_enter_jail(const char *jail, char *err, size_t errlen)
{
    return soperator_enter_jail_with(jail, NULL, 0, err, errlen);
}

int soperator_enter_jail_with(const char *jail, const struct soperator_bind *binds, size_t nbinds, char *err,
                              size_t errlen)
{
    char target[PATH_MAX];
    if (soperator_check_jail(jail, err, errlen) != 0)
        return -1;
    if (unshare(CLONE_NEWNS) != 0)
        return soperator_fail(err, errlen, "unshare(CLONE_NEWNS): %s", strerror(errno));
    /* Keep receiving the node's mounts, but never propagate ours back to the node. */
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
        return soperator_fail(err, errlen, "make / rslave: %s", strerror(errno));
    /* MS_MOVE needs the jail to be a mount point of its own. */
    if (mount(jail, jail, NULL, MS_BIND | MS_REC, NULL) != 0)
        return soperator_fail(err, errlen, "bind %s onto itself: %s", jail, strerror(errno));
    /* Setuid binaries and device nodes on the shared volume are inert in a job step. The binds
     * below the jail (/dev, the spool, sub-mounts) keep their own flags. */
    if (mount(NULL, jail, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) != 0)
        return soperator_fail(err, errlen, "remount %s nosuid,nodev: %s", jail, strerror(errno));
    /* The node's directories in their places, seen by this namespace only (/ is rslave). */
    for (size_t i = 0; i < nbinds; i++) {
        if (snprintf(target, sizeof(target), "%s%s", jail, binds[i].target) >= (int)sizeof(target))
            return soperator_fail(err, errlen, "%s%s: path too long", jail, binds[i].target);
        if (mount(binds[i].source, target, NULL, MS_BIND, NULL) != 0)
            return soperator_fail(err, errlen, "bind %s onto %s: %s", binds[i].source, target, strerror(errno));
        if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) != 0)
            return soperator_fail(err, errlen, "remount %s nosuid,nodev: %s", target, strerror(errno));
    }
    if (chdir(jail) != 0)
        return soperator_fail(err, errlen, "chdir %s: %s", jail, strerror(errno));
    /* Move the jail over / and chroot into it, as switch_root does. Not pivot_root: containerd's
     * default seccomp profile refuses it even with CAP_SYS_ADMIN (measured on a real kubelet),
     * while it allows mount and chroot. The old root lies under the moved mount: ".." at the
     * jail's root leads back into the jail, so nothing of the node is reachable by path. */
    if (mount(".", "/", NULL, MS_MOVE, NULL) != 0)
        return soperator_fail(err, errlen, "move %s over /: %s", jail, strerror(errno));
    if (chroot(".") != 0)
        return soperator_fail(err, errlen, "chroot into %s: %s", jail, strerror(errno));
    if (chdir("/") != 0)
        return soperator_fail(err, errlen, "chdir / in jail: %s", strerror(errno));
    if (mkdir("/proc", 0555) != 0 && errno != EEXIST)
        return soperator_fail(err, errlen, "mkdir /proc in jail: %s", strerror(errno));
    /* hidepid=2: a user sees only their own processes, not other users' jobs and arguments. */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") != 0)
        return soperator_fail(err, errlen, "mount /proc in jail: %s", strerror(errno));
    return soperator_mask_proc("/proc", err, errlen);
}
