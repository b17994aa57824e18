"""The one-shot Job that fills the jail volume with a full Linux root."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.render.common import Obj, labels, metadata, object_name
from soperator.render.nodes import jail_volumes
from soperator.render.paths import PATHS

POPULATE_JAIL = "populate-jail"


def populate_jail_job_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, POPULATE_JAIL)


def populate_jail_job(cluster: SlurmCluster) -> Obj:
    spec = cluster.spec
    overwrite = "true" if spec.populate_jail.overwrite else "false"
    container = {
        "name": POPULATE_JAIL,
        "image": spec.images.ref("populate-jail"),
        "imagePullPolicy": spec.images.pull_policy,
        "env": [{"name": "SOPERATOR_JAIL", "value": PATHS.populate_target},
                {"name": "SOPERATOR_POPULATE_OVERWRITE", "value": overwrite}],
        "volumeMounts": [{"name": "jail", "mountPath": PATHS.populate_target}],
        # It writes root-owned system files and sets ownership: root is needed, privileges are not.
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False},
    }
    # The main jail volume only: sub-mounts are mounted over it on the nodes, not filled.
    jail = [v for v in jail_volumes(cluster) if v["name"] == "jail"]
    pod = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [container],
        "volumes": jail,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(cluster, populate_jail_job_name(cluster), POPULATE_JAIL,
                             {"slurm.soperator.dev/overwrite": overwrite}),
        "spec": {
            "backoffLimit": spec.populate_jail.backoff_limit,
            "template": {"metadata": {"labels": labels(cluster, POPULATE_JAIL)}, "spec": pod},
        },
    }
