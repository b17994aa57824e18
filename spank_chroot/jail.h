/* Entering the jail: the part of the plugin that needs no Slurm symbols, so tests can call it. */
#ifndef SOPERATOR_JAIL_H
#define SOPERATOR_JAIL_H

#include <stddef.h>
#include <stdint.h>

/* What the plugin must do for one step. */
enum soperator_action {
    SOPERATOR_SKIP = 0,   /* not a step to jail (local context, extern step) */
    SOPERATOR_ENTER = 1,  /* enter the jail */
    SOPERATOR_REFUSE = 2, /* misconfigured: fail the step */
};

/* The plugstack.conf option (after the jail path) that lets job steps create user namespaces. */
#define SOPERATOR_OPT_ALLOW_USERNS "allow_userns"
/* The same, per node: a file on the node's own root (never the jail's), which the worker entrypoint of
 * a node set with Pyxis leaves (soperator/node/roles.py). Read before the step enters the jail. */
#define SOPERATOR_NODE_USERNS_MARK "/run/soperator/allow-user-namespaces"

/* Decide from the SPANK context (remote or not), the step id and the plugin arguments (the jail
 * path, then options). On REFUSE, err holds the reason. */
int soperator_decide(int remote, uint32_t step_id, int argc, const char *const *argv, char *err,
                     size_t errlen);

/* Check that `jail` is usable as a root: an absolute, existing directory that holds a shell.
 * Returns 0, or -1 with the reason in err. Never changes anything. */
int soperator_check_jail(const char *jail, char *err, size_t errlen);

/* Move the calling process into a new mount namespace whose root is `jail`:
 * unshare(CLONE_NEWNS), / made rslave, the jail moved over / and chrooted into (the old root
 * hidden under it), chdir /,
 * a fresh /proc. Returns 0, or -1 with the failing step and errno text in err. On failure the
 * process may be left in a private mount namespace, but its root is never the jail half-made:
 * callers must fail the step, never carry on. */
int soperator_enter_jail(const char *jail, char *err, size_t errlen);

/* A directory of the node's bound at `target` (a path inside the jail) as the jail is entered. */
struct soperator_bind {
    const char *source;
    const char *target;
};

/* soperator_enter_jail, with each of `binds` mounted (nosuid,nodev) in the new namespace before the
 * jail moves over /, so that nothing of the node's root is reachable afterwards. */
int soperator_enter_jail_with(const char *jail, const struct soperator_bind *binds, size_t nbinds, char *err,
                              size_t errlen);

/* The value of the plugin option that starts with `prefix` ("job_tmp="), or NULL. */
const char *soperator_option(int argc, const char *const *argv, const char *prefix);

/* On the fresh procfs at `proc`, what a container runtime does on its own: /proc/sys, /proc/sysrq-trigger
 * and a few more read-only, /proc/kcore and the like hidden (proc_mask.c). Returns 0, or -1 with the
 * reason in err (the caller must then fail: the procfs is half-masked). */
int soperator_mask_proc(const char *proc, char *err, size_t errlen);

/* For a task about to exec the user's program, in a mount namespace of its own: the cgroup file system
 * at `root` (and every mount below it) read-only. slurmstepd keeps its writable view. Returns 0 (also
 * when `root` does not exist), or -1 with the reason in err. */
int soperator_read_only_cgroups(const char *root, char *err, size_t errlen);
#define SOPERATOR_CGROUP_ROOT "/sys/fs/cgroup"
/* What it does where the kernel has no mount_setattr (before 5.12): each mount at or below `root`,
 * from mountinfo, remounted read-only in the caller's namespace. */
int soperator_remount_read_only_under(const char *root, char *err, size_t errlen);

/* Whether the plugin arguments carry SOPERATOR_OPT_ALLOW_USERNS. */
int soperator_allows_userns(int argc, const char *const *argv);

/* For a task about to exec the user's program: shrink the capability bounding set to a small
 * allowlist (no CAP_SYS_ADMIN, even for root), set no_new_privs and, unless allow_userns, a seccomp
 * filter that refuses creating user namespaces. Returns 0, or -1 with the reason in err. */
int soperator_restrict_task(int allow_userns, char *err, size_t errlen);

/* For a login session, in sshd's privileged process for the connection once the user is authenticated
 * (the PAM module pam_jail.c): soperator_enter_jail, then the tasks' capability bounding set (no
 * CAP_SYS_ADMIN, no CAP_SYS_CHROOT), as a job step gets. Every process the connection starts, the
 * user's shell among them, has the jail as its root, and root's session can neither mount nor chroot
 * (nothing of the login container is left to reach). Returns 0, or -1 with the reason in err: the
 * caller must then refuse the login. */
int soperator_enter_session(const char *jail, char *err, size_t errlen);

/* no_new_privs and, unless allow_userns, the filter against user namespaces, without touching the
 * capabilities, for a daemon that still needs them (sshd on login nodes: every session it starts
 * inherits both).
 * Returns 0, or -1 with the reason in err. */
int soperator_restrict_sessions(int allow_userns, char *err, size_t errlen);

/* For the image cache's imports, on top of soperator_restrict_sessions: a seccomp filter under which a
 * mount may only make a new file system or change propagation (no remount, bind or move), and
 * umount2, the new mount API, pivot_root, chroot and setns fail. Returns 0, or -1 with the reason. */
int soperator_restrict_import(char *err, size_t errlen);

#endif
