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
#include <stdio.h>
#include <syslog.h>

PAM_EXTERN int pam_sm_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
    char err[512];
    (void)flags;
    if (argc != 1) {
        pam_syslog(pamh, LOG_ERR, "usage: pam_soperator_jail.so <jail path>");
        fprintf(stderr, "pam_soperator_jail: usage: pam_soperator_jail.so <jail path>\n");
        return PAM_SYSTEM_ERR;
    }
    if (soperator_enter_session(argv[0], err, sizeof(err)) != 0) {
        /* No syslog daemon in a container: stderr reaches sshd's (the pod's) log too. */
        pam_syslog(pamh, LOG_ERR, "login refused: cannot enter the jail %s: %s", argv[0], err);
        fprintf(stderr, "pam_soperator_jail: login refused: cannot enter the jail %s: %s\n", argv[0], err);
        return PAM_PERM_DENIED;
    }
    return PAM_SUCCESS;
}
