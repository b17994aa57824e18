/* SPANK glue: slurmstepd calls slurm_spank_init_post_opt for every step; remote steps are moved
 * into the jail given as the plugin argument.
 *
 * Fail closed twice. Slurm 25.05 and later abort the step when init_post_opt fails; 22.05 and 24.11
 * logged "required plugin ... failed" and still ran the tasks on the host root (bench/fail_closed.py).
 * So each task also passes through task_init_privileged, in the forked task just before exec, and
 * exits there unless its step really entered the jail (or is a step that stays on the host).
 * The refusal is ESPANK_JOB_FAILURE: any other error fails a batch job as "batch job complete
 * failure", which drains the worker and requeues the job (slurmctld's proc_req.c), so one user's
 * missing jail would take the node from everyone. 24.11 (the release clusters upgrade from) has no
 * ESPANK_JOB_FAILURE: there the task-level exit is what refuses. */
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "jail.h"
#include "job_dirs.h"
#include "user_dirs.h"

SPANK_PLUGIN(soperator_chroot, 1);

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
#define REFUSE_STEP ESPANK_JOB_FAILURE
#else
#define REFUSE_STEP ESPANK_ERROR
#endif

/* Exit status of a task refused because the jail could not be entered ("cannot execute"). */
#define REFUSED_EXIT 126

/* Set by init_post_opt in the stepd; forked tasks inherit it. */
static enum { UNDECIDED, ALLOWED, REFUSED } step_state = UNDECIDED;
static int entered_jail = 0, allow_userns = 0;
static char refusal[512] = "the plugin did not run for this step";
/* What the refusal is about, for the logs and the user's message. */
static const char *refused_for = "cannot enter jail", *told_user = "the jail could not be entered";

/* On a worker with Pyxis: that user's own Pyxis and enroot directories, made as root inside the jail
 * from the list read on the node before entering it. */
static int make_user_dirs(spank_t sp, const char *list)
{
    uid_t uid;
    gid_t gid;
    if (list[0] == '\0')
        return 0;
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return snprintf(refusal, sizeof(refusal), "cannot read the job's user"), -1;
    return soperator_user_dirs(list, uid, gid, refusal, sizeof(refusal));
}

/* The job's own /tmp and /dev/shm on this node (job_dirs.c), when the plugin's options name their
 * bases: made here, as root on the node's root, and bound in as the step enters the jail. */
static const char *const job_dir_options[] = {SOPERATOR_OPT_JOB_TMP, SOPERATOR_OPT_JOB_SHM};
static const char *const job_dir_targets[] = {"/tmp", "/dev/shm"};

static int job_dirs(spank_t sp, int ac, char **av, struct soperator_bind *binds, size_t *nbinds)
{
    static char paths[2][4096];
    uint32_t job_id;
    for (size_t i = 0; i < 2; i++) {
        const char *base = soperator_option(ac, (const char *const *)av, job_dir_options[i]);
        if (base == NULL)
            continue;
        if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
            return snprintf(refusal, sizeof(refusal), "cannot read the job id"), -1;
        if (soperator_job_dir(base, job_id, paths[i], sizeof(paths[i]), refusal, sizeof(refusal)) != 0)
            return -1;
        binds[*nbinds].source = paths[i];
        binds[(*nbinds)++].target = job_dir_targets[i];
    }
    return 0;
}

/* Run by slurmd (as root, on the node's root) once the job has ended on this node. A directory that
 * cannot be removed is logged, not failed: a failed epilog would drain the node for everyone over one
 * user's files (the worker clears the bases when it starts). */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    uint32_t job_id;
    char err[512];
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
        return ESPANK_SUCCESS;
    for (size_t i = 0; i < 2; i++) {
        const char *base = soperator_option(ac, (const char *const *)av, job_dir_options[i]);
        if (base != NULL && soperator_remove_job_dir(base, job_id, err, sizeof(err)) != 0)
            slurm_error("soperator_chroot: job %u's %s left behind: %s", job_id, job_dir_targets[i], err);
    }
    return ESPANK_SUCCESS;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    uint32_t step_id = 0;
    int remote = spank_context() == S_CTX_REMOTE;

    if (remote && spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
        snprintf(refusal, sizeof(refusal), "cannot read the step id");
        step_state = REFUSED;
    } else {
        switch (soperator_decide(remote, step_id, ac, (const char *const *)av, refusal, sizeof(refusal))) {
        case SOPERATOR_SKIP:
            step_state = ALLOWED;
            return ESPANK_SUCCESS;
        case SOPERATOR_REFUSE:
            step_state = REFUSED;
            break;
        default:
            allow_userns = soperator_allows_userns(ac, (const char *const *)av) ||
                           access(SOPERATOR_NODE_USERNS_MARK, F_OK) == 0;
            /* Read on the node's root: after the jail is entered this file is out of sight. */
            static char user_dirs[2048];
            if (soperator_read_user_dirs(SOPERATOR_NODE_USER_DIRS, user_dirs, sizeof(user_dirs), refusal,
                                         sizeof(refusal)) != 0) {
                refused_for = told_user = "the node's list of container runtime directories is unreadable";
                step_state = REFUSED;
                break;
            }
            struct soperator_bind binds[2];
            size_t nbinds = 0;
            if (job_dirs(sp, ac, av, binds, &nbinds) != 0) {
                refused_for = told_user = "the job's private /tmp or /dev/shm could not be made";
                step_state = REFUSED;
                break;
            }
            entered_jail = soperator_enter_jail_with(av[0], binds, nbinds, refusal, sizeof(refusal)) == 0;
            step_state = entered_jail ? ALLOWED : REFUSED;
            if (entered_jail && make_user_dirs(sp, user_dirs) != 0) {
                refused_for = told_user = "its container runtime directories are not safe to use";
                step_state = REFUSED;
            }
        }
    }
    if (step_state == REFUSED) {
        slurm_error("soperator_chroot: %s: %s; refusing to run the step%s", refused_for, refusal,
                    entered_jail ? "" : " (neither on the host nor in a jail entered only in part)");
        return REFUSE_STEP;
    }
    slurm_verbose("soperator_chroot: step %u entered jail %s", step_id, av[0]);
    return ESPANK_SUCCESS;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_REMOTE)
        return ESPANK_SUCCESS;
    /* A user's program in the jail sees its cgroups read-only, gains no privilege by exec and creates
     * no user namespace. */
    if (step_state == ALLOWED && entered_jail &&
        (soperator_read_only_cgroups(SOPERATOR_CGROUP_ROOT, refusal, sizeof(refusal)) != 0 ||
         soperator_restrict_task(allow_userns, refusal, sizeof(refusal)) != 0))
        step_state = REFUSED;
    if (step_state == ALLOWED)
        return ESPANK_SUCCESS;
    slurm_error("soperator_chroot: task refused: %s", refusal);
    fprintf(stderr, "soperator: this job step was refused, nothing ran: %s (%s)\n", told_user, refusal);
    fflush(stderr);
    _exit(REFUSED_EXIT);
}
