"""The one-shot Job that fills the jail volume with a full Linux root."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.node.layout import (ENV, HOLD_ANNOTATION, HOLD_NODES, OVERWRITE_ANNOTATION, PATHS, POPULATE_JAIL,
                                   RELEASE_NODES)
from soperator.render.common import Obj, labels, metadata, object_name
from soperator.render.nodes import (CONTROLLER_CAPABILITIES, dns_config, jail_volumes, pull_secrets, root_security_context,
                                    slurm_mounts, slurm_volumes)

# The fill gives every file its owner and mode (CHOWN, FOWNER), keeps setgid bits of files it gave away
# (FSETID), and writes into directories owned by others, e.g. munge's 0700 one (DAC_OVERRIDE).
POPULATE_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID")


def populate_jail_job_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, POPULATE_JAIL)


def _slurm_step(cluster: SlurmCluster, role: str) -> Obj:
    """A container that talks to slurmctld as root (a Slurm admin) with the cluster's munge key."""
    return {
        "name": role,
        "image": cluster.spec.image("controller"),
        "imagePullPolicy": cluster.spec.images.pull_policy,
        "env": [{"name": ENV.component, "value": role}],
        "volumeMounts": slurm_mounts(),
        "securityContext": root_security_context(CONTROLLER_CAPABILITIES),
    }


def populate_jail_job(cluster: SlurmCluster, hold_nodes: bool | None = None) -> Obj:
    """The Job. An overwrite of a live cluster's jail (`hold_nodes`; by default: whenever overwrite is
    set) runs between two Slurm steps, as Kubernetes orders them: drain the nodes and wait until no job
    runs (init), fill (init), resume the nodes it drained (the Job's container). The operator passes
    hold_nodes=False for a cluster that has no workers yet: there is nothing to drain, nor a slurmctld."""
    spec = cluster.spec
    hold = spec.populate_jail.overwrite if hold_nodes is None else hold_nodes and spec.populate_jail.overwrite
    overwrite = "true" if spec.populate_jail.overwrite else "false"
    container = {
        "name": POPULATE_JAIL,
        "image": spec.image("populate-jail"),
        "imagePullPolicy": spec.images.pull_policy,
        "env": [{"name": ENV.jail, "value": PATHS.populate_target},
                {"name": ENV.populate_overwrite, "value": overwrite}],
        "volumeMounts": [{"name": "jail", "mountPath": PATHS.populate_target}],
        # It writes root-owned system files and sets ownership: root is needed, privileges are not.
        "securityContext": root_security_context(POPULATE_CAPABILITIES),
    }
    # The main jail volume only: sub-mounts are mounted over it on the nodes, not filled.
    jail = [v for v in jail_volumes(cluster) if v["name"] == "jail"]
    pod: Obj = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [container],
        "volumes": jail,
        **pull_secrets(cluster),
    }
    if hold:
        pod |= {"initContainers": [_slurm_step(cluster, HOLD_NODES), container],
                "containers": [_slurm_step(cluster, RELEASE_NODES)],
                "volumes": jail + slurm_volumes(cluster),
                # scontrol finds slurmctld by its bare pod name, as the nodes do (measured on the real
                # node: without the search domains, hold-nodes timed out and the Job failed).
                "dnsConfig": dns_config(cluster)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(cluster, populate_jail_job_name(cluster), POPULATE_JAIL,
                             {OVERWRITE_ANNOTATION: overwrite,
                              HOLD_ANNOTATION: "true" if hold else "false"}),
        "spec": {
            "backoffLimit": spec.populate_jail.backoff_limit,
            "template": {"metadata": {"labels": labels(cluster, POPULATE_JAIL)}, "spec": pod},
        },
    }
