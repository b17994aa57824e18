"""Slurm's in-place upgrade, planned from the snapshot alone (pure): which release each part of the
cluster is rendered for this pass.

Slurm's order: slurmdbd first (it converts the database; MariaDB moves with it), then slurmctld (it
reads the older release's state files, and its slurmrestd moves with it), then the workers through
their node sets' drain-first rollout (a newer slurmctld serves older slurmd meanwhile, and no running
job is ended), the login nodes last. A part moves only once every part before it runs the new
release and is ready. A part that waits keeps its StatefulSet's live images, so an admin who changed
`images` and `slurmVersion` together sees the new images arrive in that order too.

slurm.conf is written for the oldest Slurm still reading it: 24.11 stops at a key it does not know. The
jail's own Slurm clients (sbatch, srun, sacct in login sessions and job steps) read it too, and they
are the release the jail was last populated from: they move only when the admin refills the jail's
system files from the new release's image (`populateJail.overwrite`, user data kept), so until then
the config stays written for them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from soperator.api import releases
from soperator.api.cluster import SlurmCluster
from soperator.node.layout import (COMPONENT_LABEL, CONTROLLER, DATABASE, LOGIN, REVISION_LABEL, SLURM_RELEASE_LABEL,
                                   SLURMDBD, UNLABELLED_RELEASE, WORKER)
from soperator.reconcile.conditions import Cond
from soperator.reconcile.jobs import job_condition
from soperator.reconcile.observe import Snapshot
from soperator.render.common import object_name
from soperator.render.populate_jail import populate_jail_job_name

# In Slurm's upgrade order. accounting: slurmdbd and its database; controller: slurmctld and slurmrestd.
PARTS = ("accounting", "controller", "workers", "login")
_COMPONENTS = {"accounting": (SLURMDBD, DATABASE), "controller": (CONTROLLER,), "workers": (WORKER,),
               "login": (LOGIN,)}


@dataclass(frozen=True)
class Part:
    """One part as observed: what its StatefulSets are rendered for, what its pods run."""

    templates: frozenset[str] = frozenset()  # releases of its StatefulSets' pod templates
    running: frozenset[str] = frozenset()  # releases of its pods
    settled: bool = True  # every pod on its StatefulSet's current revision, ready, as many as wanted
    images: dict[str, str] = field(default_factory=dict)  # StatefulSet name: its first container's image

    @property
    def present(self) -> bool:
        return bool(self.templates or self.running)

    def on(self, release: str) -> bool:
        return self.templates <= {release} and self.running <= {release} and self.settled


@dataclass(frozen=True)
class UpgradePlan:
    wanted: str
    parts: dict[str, str]  # part: the release it is rendered for this pass
    config: str  # the release slurm.conf is written for
    running: dict[str, list[str]]  # part: releases its pods run, for the status
    held_images: dict[str, str] = field(default_factory=dict)  # StatefulSet name: the image it keeps
    refused: str | None = None
    waiting: str | None = None  # what the upgrade waits for; None when none is under way

    def rest_release(self) -> str:
        """The release the controller pod runs (slurmrestd's), the one it is rendered for while none runs."""
        running = self.running.get("controller") or [self.parts["controller"]]
        return releases.oldest(running)

    def condition(self) -> Cond:
        if self.refused:
            return Cond("SlurmUpgraded", False, "UpgradeRefused", self.refused)
        if self.waiting:
            return Cond("SlurmUpgraded", False, "Upgrading", self.waiting)
        jail = self.running.get("jail") or [self.wanted]
        if jail != [self.wanted]:
            return Cond("SlurmUpgraded", True, "JailClientsOlder", (
                f"every daemon runs Slurm {self.wanted}; the jail's Slurm clients are {', '.join(jail)}'s (Slurm "
                f"serves them) and slurm.conf stays written for them: set populateJail.overwrite to refill the jail's "
                f"system files from the {self.wanted} image (user data is kept)"))
        return Cond("SlurmUpgraded", True, "Current", f"every daemon and the jail's clients run Slurm {self.wanted}")

    def status(self) -> dict:
        out = {"wanted": self.wanted, "config": self.config}
        out.update({part: self.running[part] for part in (*PARTS, "jail") if self.running.get(part)})
        return out


def release_of(obj: dict) -> str:
    return (obj["metadata"].get("labels") or {}).get(SLURM_RELEASE_LABEL, UNLABELLED_RELEASE)


def _template_release(sts: dict) -> str:
    return release_of(sts["spec"]["template"])


def _pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _settled(sts: dict, pods: list[dict]) -> bool:
    status = sts.get("status") or {}
    revision = status.get("updateRevision")
    want = (sts.get("spec") or {}).get("replicas", 0)
    current = [p for p in pods if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision]
    return (status.get("observedGeneration") == sts["metadata"].get("generation") and len(pods) == want
            and len(current) == want and all(_pod_ready(p) for p in pods))


def observe_parts(snap: Snapshot) -> dict[str, Part]:
    out = {}
    for part, components in _COMPONENTS.items():
        sets = [sts for (kind, _), sts in sorted(snap.children.items()) if kind == "StatefulSet"
                and (sts["metadata"].get("labels") or {}).get(COMPONENT_LABEL) in components]
        pods = [p for c in components for p in snap.pods_of(c)]
        settled = all(_settled(sts, [p for p in pods if p["metadata"]["name"].rsplit("-", 1)[0]
                                     == sts["metadata"]["name"]]) for sts in sets)
        images = {sts["metadata"]["name"]: sts["spec"]["template"]["spec"]["containers"][0]["image"] for sts in sets}
        out[part] = Part(frozenset(map(_template_release, sets)), frozenset(map(release_of, pods)), settled, images)
    return out


def plan_upgrade(wanted: str, parts: dict[str, Part], jail: str | None = None) -> UpgradePlan:
    """Each part at `wanted` once every part before it runs `wanted`, settled; else at its own (oldest)
    release. A cluster with no part yet starts at `wanted`. `jail`: the release of the jail's clients
    (jail_release), if it was populated."""
    running = {p: sorted(parts[p].running | parts[p].templates, key=releases.key) for p in PARTS}
    if jail:
        running["jail"] = [jail]
    seen = {r for rs in running.values() for r in rs}
    for release in sorted(seen, key=releases.key):
        why = releases.refusal(release, wanted)
        if why:
            current = {p: releases.oldest(rs) for p, rs in running.items() if rs}
            return UpgradePlan(wanted, current, releases.oldest(seen), running, refused=why)
    rendered, waiting, held = {}, None, {}
    for part in PARTS:
        state = parts[part]
        if waiting is None or not state.present:
            rendered[part] = wanted
        else:
            rendered[part] = releases.oldest(state.templates | state.running)
            held.update(state.images)
        if waiting is None and state.present and not state.on(wanted):
            waiting = _waiting_note(part, wanted, state)
    config = releases.oldest(seen | {wanted})
    return UpgradePlan(wanted, rendered, config, running, held, waiting=waiting)


def jail_release(snap: Snapshot) -> str | None:
    """The release the jail's Slurm clients are: the populate-jail Job's that last succeeded. While a
    refill runs (or failed) the jail holds both, and the one recorded before stands for it."""
    job = snap.live("Job", populate_jail_job_name(snap.cluster))
    recorded = ((snap.body.get("status") or {}).get("slurmRelease") or {}).get("jail") or []
    if job is not None and job_condition(job, "Complete"):
        return release_of(job["spec"]["template"])
    if recorded:
        return releases.oldest(recorded)
    return release_of(job["spec"]["template"]) if job is not None else None


def _waiting_note(part: str, wanted: str, state: Part) -> str:
    what = {"accounting": "slurmdbd", "controller": "slurmctld", "workers": "the workers (drain-first)",
            "login": "the login nodes"}[part]
    on = ", ".join(sorted(state.running | state.templates, key=releases.key))
    return f"upgrading to Slurm {wanted}: {what} on {on}, moving" + (
        "; the parts after it wait" if part != "login" else "")


def part_cluster(cluster: SlurmCluster, plan: UpgradePlan, part: str) -> SlurmCluster:
    """The cluster as `part` is rendered this pass: its release, and its live images while it waits."""
    release = {"config": plan.config, "rest": plan.rest_release()}.get(part) or plan.parts[part]
    if release == cluster.spec.slurm_version:
        return cluster
    held = cluster.model_copy(deep=True)
    held.spec.slurm_version = release
    images = held.spec.images
    if part == "accounting":
        images.controller = plan.held_images.get(object_name(cluster, SLURMDBD), images.controller)
        images.database = plan.held_images.get(object_name(cluster, DATABASE), images.database)
    elif part in ("controller", "login"):
        component = CONTROLLER if part == "controller" else LOGIN
        setattr(images, component, plan.held_images.get(object_name(cluster, component), getattr(images, component)))
    elif part == "workers":
        for node_set in held.spec.node_sets:
            node_set.image = plan.held_images.get(object_name(cluster, node_set.name), node_set.image)
    return held
