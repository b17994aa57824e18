"""The populate-jail Job: run once, re-run only when populateJail.overwrite changes, never in a loop."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.kube import Kube
from soperator.node.layout import HOLD_ANNOTATION, JOB_NAME_LABEL, OVERWRITE_ANNOTATION
from soperator.reconcile.conditions import Cond
from soperator.reconcile.observe import Snapshot
from soperator.reconcile.pod_status import last_termination
from soperator.render.populate_jail import populate_jail_job, populate_jail_job_name


def job_condition(job: dict, kind: str) -> dict | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def _pod_reason(kube: Kube, cluster: SlurmCluster, job_name: str) -> str:
    for pod in kube.list("v1", "Pod", cluster.namespace, f"{JOB_NAME_LABEL}={job_name}"):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = last_termination(cs)
            if term:
                return f"pod {pod['metadata']['name']}: {term.get('reason')} (exit {term.get('exitCode')}) " \
                       f"{term.get('message') or ''}".strip()
    return "no pod status"


def _desired(snap: Snapshot, cluster: SlurmCluster) -> dict:
    """An overwrite holds the Slurm nodes first, if the cluster has any (a node set's StatefulSet exists)."""
    live = snap.node_set_stateful_sets()
    live_workers = cluster.spec.populate_jail.overwrite and any(n.name in live for n in cluster.spec.node_sets)
    return populate_jail_job(cluster, hold_nodes=live_workers)


def populate_state(kube: Kube, snap: Snapshot, release_of: SlurmCluster | None = None) -> Cond:
    """`release_of`: the cluster as its login nodes are rendered (reconcile/upgrade.py): a Job made now
    fills the jail with their release's clients, never newer than a daemon still running."""
    cluster = snap.cluster
    name = populate_jail_job_name(cluster)
    live = snap.live("Job", name)
    if live is None:
        snap.wrote(kube.apply(_desired(snap, release_of or cluster)))
        return Cond("JailPopulated", None, "JobCreated", f"Job {name} started")
    if live["metadata"].get("deletionTimestamp"):
        return Cond("JailPopulated", None, "Repopulating", f"waiting for the old Job {name} to go")
    want = "true" if cluster.spec.populate_jail.overwrite else "false"
    have = (live["metadata"].get("annotations") or {}).get(OVERWRITE_ANNOTATION)
    finished = job_condition(live, "Complete") or job_condition(live, "Failed")
    if have != want and finished:
        # A Job's pod template cannot change: a new overwrite setting means a new Job.
        kube.delete("batch/v1", "Job", cluster.namespace, name)
        return Cond("JailPopulated", None, "Repopulating", f"populateJail.overwrite={want}: Job {name} recreated")
    if job_condition(live, "Complete"):
        return Cond("JailPopulated", True, "JobSucceeded", f"Job {name} succeeded")
    failed = job_condition(live, "Failed")
    if failed:
        return Cond("JailPopulated", False, "JobFailed",
                    f"Job {name} failed: {failed.get('reason')}: {_pod_reason(kube, cluster, name)}")
    holding = (live["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION) == "true"
    return Cond("JailPopulated", None, "JobRunning", f"Job {name} is running"
                + (": it drains the Slurm nodes and waits for their jobs to end first" if holding else ""))
