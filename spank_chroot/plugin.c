/* SPANK glue: slurmstepd calls slurm_spank_init_post_opt for every step; remote steps are moved
 * into the jail given as the plugin argument. Any failure fails the step (fail closed). */
#include <slurm/spank.h>
#include <stdint.h>

#include "jail.h"

SPANK_PLUGIN(soperator_chroot, 1);

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    char err[512] = "";
    uint32_t step_id = 0;
    int remote = spank_context() == S_CTX_REMOTE;

    if (remote && spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
        slurm_error("soperator_chroot: cannot read the step id; refusing to run the step");
        return ESPANK_ERROR;
    }
    switch (soperator_decide(remote, step_id, ac, (const char *const *)av, err, sizeof(err))) {
    case SOPERATOR_SKIP:
        return ESPANK_SUCCESS;
    case SOPERATOR_REFUSE:
        slurm_error("soperator_chroot: %s; refusing to run the step", err);
        return ESPANK_ERROR;
    }
    if (soperator_enter_jail(av[0], err, sizeof(err)) != 0) {
        slurm_error("soperator_chroot: cannot enter jail: %s; refusing to run the step on the host", err);
        return ESPANK_ERROR;
    }
    slurm_verbose("soperator_chroot: step %u entered jail %s", step_id, av[0]);
    return ESPANK_SUCCESS;
}
