/* Pyxis makes <runtime_path>/<uid> and takes EEXIST as success; enroot makes its user-<uid> tree with
 * mkdir -p and runs whatever container it finds there. In a parent anyone may write, one user could
 * plant another's directory, and the victim's next --container-name step would run the planted root
 * filesystem as the victim. So the parents are root's (the worker entrypoint), and each step's own
 * directories are made here, as root, before Pyxis runs; one that is not the user's fails the step. */
#define _GNU_SOURCE
#include "user_dirs.h"
#include "fail.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int soperator_read_user_dirs(const char *file, char *buf, size_t buflen, char *err, size_t errlen)
{
    buf[0] = '\0';
    FILE *fh = fopen(file, "re");
    if (fh == NULL)
        return errno == ENOENT ? 0 : soperator_fail(err, errlen, "%s: %s", file, strerror(errno));
    size_t n = fread(buf, 1, buflen - 1, fh);
    int bad = ferror(fh) || !feof(fh);
    fclose(fh);
    if (bad)
        return soperator_fail(err, errlen, "%s: unreadable or longer than %zu bytes", file, buflen - 1);
    buf[n] = '\0';
    return 0;
}

int soperator_user_dir_template_ok(const char *line)
{
    const char *mark = strchr(line, '%');
    return line[0] == '/' && mark != NULL && mark[1] == 'u' && strchr(mark + 2, '%') == NULL &&
           strlen(line) < PATH_MAX / 2;
}

static int parent_is_roots(const char *path, char *err, size_t errlen)
{
    char copy[PATH_MAX];
    struct stat st;
    snprintf(copy, sizeof(copy), "%s", path);
    const char *parent = dirname(copy);
    if (lstat(parent, &st) != 0)
        return soperator_fail(err, errlen, "%s: %s", parent, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return soperator_fail(err, errlen, "%s must be a directory of root's that nobody else may write "
                              "(owner %u, mode %04o)", parent, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    return 0;
}

int soperator_user_dir(const char *path, uint32_t uid, uint32_t gid, char *err, size_t errlen)
{
    struct stat st;
    if (strlen(path) >= PATH_MAX)
        return soperator_fail(err, errlen, "path too long");
    if (parent_is_roots(path, err, errlen) != 0)
        return -1;
    if (mkdir(path, 0700) == 0) {
        /* chmod while root still owns it: root on a worker has no CAP_FOWNER. */
        if (chmod(path, 0700) != 0 || lchown(path, uid, gid) != 0) {
            int saved = errno;
            rmdir(path);
            return soperator_fail(err, errlen, "%s: cannot give it to uid %u: %s", path, (unsigned)uid,
                                  strerror(saved));
        }
        return 0;
    }
    if (errno != EEXIST)
        return soperator_fail(err, errlen, "%s: %s", path, strerror(errno));
    if (lstat(path, &st) != 0)
        return soperator_fail(err, errlen, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return soperator_fail(err, errlen, "%s is not the job user's own (uid %u): it is a %s of uid %u, mode "
                              "%04o; the step is refused until an admin removes it", path, (unsigned)uid,
                              S_ISDIR(st.st_mode) ? "directory" : S_ISLNK(st.st_mode) ? "link" : "file",
                              (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    return 0;
}

int soperator_user_dirs(const char *list, uint32_t uid, uint32_t gid, char *err, size_t errlen)
{
    char line[PATH_MAX], path[PATH_MAX];
    for (const char *at = list; *at != '\0';) {
        size_t len = strcspn(at, "\n");
        if (len >= sizeof(line))
            return soperator_fail(err, errlen, "a line of %s is too long", SOPERATOR_NODE_USER_DIRS);
        memcpy(line, at, len);
        line[len] = '\0';
        at += len + (at[len] == '\n');
        if (len == 0)
            continue;
        if (!soperator_user_dir_template_ok(line))
            return soperator_fail(err, errlen, "%s: '%s' is not an absolute path with one %%u",
                                  SOPERATOR_NODE_USER_DIRS, line);
        const char *mark = strchr(line, '%');
        int n = snprintf(path, sizeof(path), "%.*s%u%s", (int)(mark - line), line, (unsigned)uid, mark + 2);
        if (n < 0 || (size_t)n >= sizeof(path))
            return soperator_fail(err, errlen, "%s: path too long", line);
        if (soperator_user_dir(path, uid, gid, err, errlen) != 0)
            return -1;
    }
    return 0;
}
