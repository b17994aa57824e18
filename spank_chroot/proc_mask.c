/* The runtime's masks on a fresh procfs. A container runtime leaves /proc/sys and a few more
 * read-only and hides /proc/kcore and the like; a job step's or login session's own procfs has none
 * of that, and root there could write kernel.core_pattern: a way from jail root to node root. The
 * same lists as the OCI runtimes' defaults (runc's, as containerd and CRI-O configure it). */
#define _GNU_SOURCE
#include "fail.h"
#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char *const read_only[] = {"bus", "fs", "irq", "sys", "sysrq-trigger"};
static const char *const masked[] = {"acpi", "asound", "interrupts", "kcore", "keys", "latency_stats",
                                     "sched_debug", "scsi", "timer_list", "timer_stats"};

static int make_read_only(const char *path, char *err, size_t errlen)
{
    if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0)
        return soperator_fail(err, errlen, "bind %s onto itself: %s", path, strerror(errno));
    if (mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        return soperator_fail(err, errlen, "remount %s read-only: %s", path, strerror(errno));
    return 0;
}

/* The null device a masked file is bound to, held open so that what is checked is what is bound:
 * the worker binds the node's /dev into the jail, but a /dev/null that were a plain file of the
 * jail would turn each masked file into one root could write. */
static int open_null_device(char *err, size_t errlen)
{
    struct stat st;
    int fd = open("/dev/null", O_PATH | O_CLOEXEC);
    if (fd < 0)
        return soperator_fail(err, errlen, "open /dev/null to mask /proc with: %s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
        close(fd);
        return soperator_fail(err, errlen, "/dev/null is not the null device (character device 1:3): "
                              "/proc cannot be masked with it");
    }
    return fd;
}

static int mask(const char *path, const struct stat *st, int null_fd, char *err, size_t errlen)
{
    char null_path[64];
    /* A directory gets an empty read-only tmpfs, a file the null device, as runc does. */
    if (S_ISDIR(st->st_mode)) {
        if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
            return soperator_fail(err, errlen, "mask %s: %s", path, strerror(errno));
        return 0;
    }
    snprintf(null_path, sizeof(null_path), "/proc/self/fd/%d", null_fd);
    if (mount(null_path, path, NULL, MS_BIND, NULL) != 0)
        return soperator_fail(err, errlen, "mask %s with /dev/null: %s", path, strerror(errno));
    return 0;
}

static int mask_all(const char *proc, int null_fd, char *err, size_t errlen)
{
    char path[PATH_MAX];
    struct stat st;

    for (size_t i = 0; i < sizeof(read_only) / sizeof(read_only[0]) + sizeof(masked) / sizeof(masked[0]); i++) {
        int hide = i >= sizeof(read_only) / sizeof(read_only[0]);
        const char *name = hide ? masked[i - sizeof(read_only) / sizeof(read_only[0])] : read_only[i];
        if (snprintf(path, sizeof(path), "%s/%s", proc, name) >= (int)sizeof(path))
            return soperator_fail(err, errlen, "%s/%s: path too long", proc, name);
        if (lstat(path, &st) != 0) {
            if (errno == ENOENT)
                continue; /* this kernel has no such file */
            return soperator_fail(err, errlen, "stat %s: %s", path, strerror(errno));
        }
        if ((hide ? mask(path, &st, null_fd, err, errlen) : make_read_only(path, err, errlen)) != 0)
            return -1;
    }
    return 0;
}

int soperator_mask_proc(const char *proc, char *err, size_t errlen)
{
    int null_fd = open_null_device(err, errlen);
    if (null_fd < 0)
        return -1;
    int rc = mask_all(proc, null_fd, err, errlen);
    close(null_fd);
    return rc;
}
