/* A job's private /tmp and /dev/shm on a worker (job_dirs.c). */
#ifndef SOPERATOR_JOB_DIRS_H
#define SOPERATOR_JOB_DIRS_H

#include <stddef.h>
#include <stdint.h>

/* The plugstack.conf options (after the jail path) naming the node's bases of jobs' directories. */
#define SOPERATOR_OPT_JOB_TMP "job_tmp="
#define SOPERATOR_OPT_JOB_SHM "job_shm="

/* `base`/<job_id>: made (root's, mode 1777) unless there; `base` itself made root's and 0700 when
 * missing, and refused when another user may write it or it is a link. The path goes to `path`.
 * Returns 0, or -1 with the reason in err. */
int soperator_job_dir(const char *base, uint32_t job_id, char *path, size_t pathlen, char *err, size_t errlen);

/* `base`/<job_id> and everything under it removed, never following a link or crossing a mount.
 * Returns 0 (also when it is not there), or -1 with the reason in err. */
int soperator_remove_job_dir(const char *base, uint32_t job_id, char *err, size_t errlen);

#endif
