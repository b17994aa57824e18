/* pam_soperator_jail.so: login sessions enter the jail as job steps do. sshd runs the account step in
 * its privileged process for the connection, after the key was accepted and before any session
 * starts; that process and everything it starts from then on have the jail as their root, in a mount
 * namespace of their own, and the tasks' capability bounding set (restrict.c). sshd's own
 * ChrootDirectory would leave root with CAP_SYS_CHROOT in a plain chroot, a way back to the login
 * container's root. The account step, not the session step: OpenSSH lets a session whose PAM session
 * step failed go on, while a failed account step refuses the login (fail closed).
 *
 * Usage in sshd's PAM service: account required pam_soperator_jail.so <jail path> */
#define _GNU_SOURCE
#include "jail.h"

#include <security/pam_ext.h>
#include <security/pam_modules.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

/* To syslog and, as no syslog daemon runs in a container, to stderr: sshd's (the pod's) log. */
static void report(pam_handle_t *pamh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(pam_handle_t *pamh, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    pam_vsyslog(pamh, LOG_ERR, fmt, args);
    va_end(args);
    va_start(args, fmt);
    fputs("pam_soperator_jail: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
}

PAM_EXTERN int pam_sm_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
    char err[512];
    (void)flags;
    if (argc != 1) {
        report(pamh, "usage: pam_soperator_jail.so <jail path>");
        return PAM_SYSTEM_ERR;
    }
    if (soperator_enter_session(argv[0], err, sizeof(err)) != 0) {
        report(pamh, "login refused: cannot enter the jail %s: %s", argv[0], err);
        return PAM_PERM_DENIED;
    }
    return PAM_SUCCESS;
}
