/* Per-user runtime directories that Pyxis and enroot use on a worker, made by root for each step. */
#ifndef SOPERATOR_USER_DIRS_H
#define SOPERATOR_USER_DIRS_H

#include <stddef.h>
#include <stdint.h>

/* A file on the node's own root (never the jail's), which the worker entrypoint of a node set with
 * Pyxis writes (soperator/node/roles.py): one directory per line, "%u" standing for the step's uid.
 * Read before the step enters the jail, so nothing in the jail can forge or hide it. */
#define SOPERATOR_NODE_USER_DIRS "/run/soperator/user-dirs"

/* The list in `file` into buf; an empty list when there is no such file (a worker without Pyxis).
 * Returns 0, or -1 with the reason in err. */
int soperator_read_user_dirs(const char *file, char *buf, size_t buflen, char *err, size_t errlen);

/* Whether `line` is an absolute path with one %u and no other '%'. */
int soperator_user_dir_template_ok(const char *line);

/* Make `path` the user's own: created 0700 and owned by uid:gid when missing; when present it must be
 * a directory (not a link) owned by uid that nobody else may write. Its parent must be a directory of
 * root's that nobody else may write, so no user can plant or swap it. Returns 0, or -1 with the
 * reason in err. */
int soperator_user_dir(const char *path, uint32_t uid, uint32_t gid, char *err, size_t errlen);

/* soperator_user_dir for every line of `list` (as read by soperator_read_user_dirs). */
int soperator_user_dirs(const char *list, uint32_t uid, uint32_t gid, char *err, size_t errlen);

#endif
