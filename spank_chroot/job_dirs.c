/* A job's private /tmp and /dev/shm. The jail's /tmp and /dev/shm are the node container's, one for
 * every job and user on the node: files one job leaves there outlive it and fill the node, and a
 * job's predictable names (/tmp/job.lock, MPI's shared-memory segments) collide with another's. So
 * each job gets a directory of its own under a root-only base on the node, bound over the jail's
 * /tmp and /dev/shm in every step's mount namespace (all of a job's steps on a node share it, as its
 * MPI ranks must), and removed by the job's epilog. Not Slurm's job_container/tmpfs or
 * namespace/linux: their mounts are made on the node's root, which the jail's move over / hides. */
#define _GNU_SOURCE
#include "job_dirs.h"
#include "fail.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every component of `path` made if missing, each new one root's and closed to others. */
static int make_base(const char *path, char *err, size_t errlen)
{
    char copy[PATH_MAX];
    if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy))
        return soperator_fail(err, errlen, "%s: path too long", path);
    for (char *slash = strchr(copy + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (slash != NULL)
            *slash = '\0';
        if (mkdir(copy, 0700) != 0 && errno != EEXIST)
            return soperator_fail(err, errlen, "mkdir %s: %s", copy, strerror(errno));
        if (slash == NULL)
            return 0;
        *slash = '/';
    }
}

int soperator_job_dir(const char *base, uint32_t job_id, char *path, size_t pathlen, char *err, size_t errlen)
{
    struct stat st;
    char name[16];

    if (base[0] != '/')
        return soperator_fail(err, errlen, "job directory base must be absolute: '%s'", base);
    if (make_base(base, err, errlen) != 0)
        return -1;
    /* The base must be root's alone: nobody else may plant or swap a job's directory in it. */
    int fd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return soperator_fail(err, errlen, "open %s: %s", base, strerror(errno));
    if (fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        close(fd);
        return soperator_fail(err, errlen, "%s must be a directory of root's that nobody else may write", base);
    }
    snprintf(name, sizeof(name), "%u", job_id);
    int made = mkdirat(fd, name, 0700) == 0;
    if (!made && errno != EEXIST) {
        int saved = errno;
        close(fd);
        return soperator_fail(err, errlen, "mkdir %s/%s: %s", base, name, strerror(saved));
    }
    /* As a machine's /tmp: anyone in the job may make files, only their owner may remove them. */
    int bad = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
              (made && fchmodat(fd, name, 01777, 0) != 0);
    close(fd);
    if (bad)
        return soperator_fail(err, errlen, "%s/%s must be a directory of root's", base, name);
    if (snprintf(path, pathlen, "%s/%s", base, name) >= (int)pathlen)
        return soperator_fail(err, errlen, "%s/%s: path too long", base, name);
    return 0;
}

static int removal_errno;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) != 0 && removal_errno == 0)
        removal_errno = errno;
    return 0;
}

int soperator_remove_job_dir(const char *base, uint32_t job_id, char *err, size_t errlen)
{
    char path[PATH_MAX];
    struct stat st;

    if (snprintf(path, sizeof(path), "%s/%u", base, job_id) >= (int)sizeof(path))
        return soperator_fail(err, errlen, "%s/%u: path too long", base, job_id);
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : soperator_fail(err, errlen, "%s: %s", path, strerror(errno));
    /* The job's processes are gone when its epilog runs, so nothing swaps a directory for a link
     * under the walk; it still never follows one, nor leaves the file system. */
    removal_errno = 0;
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
        return soperator_fail(err, errlen, "remove %s: %s", path, strerror(errno));
    if (removal_errno != 0)
        return soperator_fail(err, errlen, "remove %s: %s", path, strerror(removal_errno));
    return 0;
}
