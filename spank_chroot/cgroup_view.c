/* A task's own view of the cgroup file system, read-only. slurmstepd creates and fills the job's
 * cgroups from inside the jail, so the jail shows the node's cgroup mounts writable; the task gets a
 * mount namespace of its own in which they are read-only, and no CAP_SYS_ADMIN to undo that. So root
 * in a job cannot raise its own or another job's limits, or move itself out of its cgroup, while
 * slurmstepd, in the step's namespace, keeps writing them. */
#define _GNU_SOURCE
#include "fail.h"
#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442 /* the same number on every architecture (5.12's new syscall table) */
#endif

int soperator_read_only_cgroups(const char *root, char *err, size_t errlen)
{
    struct stat st;
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};

    if (stat(root, &st) != 0) {
        if (errno == ENOENT)
            return 0; /* nothing to protect */
        return soperator_fail(err, errlen, "stat %s: %s", root, strerror(errno));
    }
    if (unshare(CLONE_NEWNS) != 0)
        return soperator_fail(err, errlen, "unshare(CLONE_NEWNS) for the task: %s", strerror(errno));
    /* Recursive: under cgroup v1 each controller is a mount of its own below the root. */
    if (syscall(SYS_mount_setattr, AT_FDCWD, root, AT_RECURSIVE, &attr, sizeof(attr)) != 0)
        return soperator_fail(err, errlen, "make %s read-only for the task: %s", root, strerror(errno));
    return 0;
}
