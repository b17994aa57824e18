/* A task's own view of the cgroup file system, read-only. slurmstepd creates and fills the job's
 * cgroups from inside the jail, so the jail shows the node's cgroup mounts writable; the task gets a
 * mount namespace of its own in which they are read-only, and no CAP_SYS_ADMIN to undo that. So root
 * in a job's task cannot raise its own or another job's limits, or move itself out of its cgroup,
 * while slurmstepd, in the step's namespace, keeps writing them. */
#define _GNU_SOURCE
#include "fail.h"
#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442 /* the same number on every architecture (5.12's new syscall table) */
#endif

#define REMOUNT_READ_ONLY (MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)

/* Kernels before 5.12 have no mount_setattr: each mount at or below `root` is remounted on its own,
 * read from mountinfo (cgroup file systems are nosuid,nodev,noexec already). */
int soperator_remount_read_only_under(const char *root, char *err, size_t errlen)
{
    char line[4096], point[4096];
    size_t len = strlen(root);
    FILE *info = fopen("/proc/self/mountinfo", "re");
    if (info == NULL)
        return soperator_fail(err, errlen, "open /proc/self/mountinfo: %s", strerror(errno));
    while (fgets(line, sizeof(line), info) != NULL) {
        /* ID, parent, dev, root, mount point: paths with spaces are octal-escaped, so %s takes them. */
        if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 || strncmp(point, root, len) != 0 ||
            (point[len] != '\0' && point[len] != '/'))
            continue;
        if (mount(NULL, point, NULL, REMOUNT_READ_ONLY, NULL) != 0) {
            int saved = errno;
            fclose(info);
            return soperator_fail(err, errlen, "make %s read-only for the task: %s", point, strerror(saved));
        }
    }
    fclose(info);
    return 0;
}

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
    if (syscall(SYS_mount_setattr, AT_FDCWD, root, AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
        if (errno == EINVAL)
            return 0; /* not a mount point: no cgroup file system mounted there, nothing to protect */
        if (errno != ENOSYS)
            return soperator_fail(err, errlen, "make %s read-only for the task: %s", root, strerror(errno));
        if (soperator_remount_read_only_under(root, err, errlen) != 0)
            return -1;
    }
    /* A mount made later in the step's namespace must not arrive writable in the task's. */
    if (mount(NULL, root, NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return soperator_fail(err, errlen, "make %s private for the task: %s", root, strerror(errno));
    return 0;
}
