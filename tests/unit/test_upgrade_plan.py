"""The in-place upgrade's planner (reconcile/upgrade.py), from tables of observed parts: Slurm's order
(slurmdbd, slurmctld, the workers, login), each part moving only once those before it run the new
release and are settled; slurm.conf for the oldest daemon; a downgrade or too long a jump refused."""
from __future__ import annotations

import pytest

from soperator.api.cluster import SlurmCluster
from soperator.reconcile.upgrade import Part, part_cluster, plan_upgrade

OLD, NEW = "24.11", "26.05"


def on(release: str, settled: bool = True, image: str | None = None, name: str = "c-controller") -> Part:
    return Part(frozenset({release}), frozenset({release}), settled, {name: image or f"img:{release}"})


def cluster_of(parts: dict[str, Part]) -> dict[str, Part]:
    return {p: parts.get(p, Part()) for p in ("accounting", "controller", "workers", "login")}


def test_a_new_cluster_starts_on_the_release_it_asks_for():
    plan = plan_upgrade(NEW, cluster_of({}))
    assert plan.parts == dict.fromkeys(("accounting", "controller", "workers", "login"), NEW)
    assert (plan.config, plan.refused, plan.waiting) == (NEW, None, None)
    assert plan.condition().ok is True


# Each row: the parts as observed, then the release each is rendered for and the config's.
ORDER = [
    ("nothing moved yet: slurmdbd first",
     {"accounting": on(OLD), "controller": on(OLD), "workers": on(OLD), "login": on(OLD)},
     {"accounting": NEW, "controller": OLD, "workers": OLD, "login": OLD}, OLD),
    ("slurmdbd rendered new, its pod not yet replaced: the rest waits",
     {"accounting": Part(frozenset({NEW}), frozenset({OLD}), False), "controller": on(OLD), "workers": on(OLD),
      "login": on(OLD)},
     {"accounting": NEW, "controller": OLD, "workers": OLD, "login": OLD}, OLD),
    ("slurmdbd new but not ready: the rest waits",
     {"accounting": on(NEW, settled=False), "controller": on(OLD), "workers": on(OLD), "login": on(OLD)},
     {"accounting": NEW, "controller": OLD, "workers": OLD, "login": OLD}, OLD),
    ("slurmdbd done: slurmctld moves",
     {"accounting": on(NEW), "controller": on(OLD), "workers": on(OLD), "login": on(OLD)},
     {"accounting": NEW, "controller": NEW, "workers": OLD, "login": OLD}, OLD),
    ("slurmctld done: the workers move (their rollout drains them one by one)",
     {"accounting": on(NEW), "controller": on(NEW), "workers": on(OLD), "login": on(OLD)},
     {"accounting": NEW, "controller": NEW, "workers": NEW, "login": OLD}, OLD),
    ("workers half replaced: login still waits, the config stays old",
     {"accounting": on(NEW), "controller": on(NEW),
      "workers": Part(frozenset({NEW}), frozenset({OLD, NEW}), False), "login": on(OLD)},
     {"accounting": NEW, "controller": NEW, "workers": NEW, "login": OLD}, OLD),
    ("workers done: login moves last",
     {"accounting": on(NEW), "controller": on(NEW), "workers": on(NEW), "login": on(OLD)},
     {"accounting": NEW, "controller": NEW, "workers": NEW, "login": NEW}, OLD),
    ("no accounting: slurmctld first",
     {"controller": on(OLD), "workers": on(OLD), "login": on(OLD)},
     {"accounting": NEW, "controller": NEW, "workers": OLD, "login": OLD}, OLD),
]


@pytest.mark.parametrize("observed, rendered, config", [row[1:] for row in ORDER], ids=[row[0] for row in ORDER])
def test_parts_move_in_slurms_order(observed, rendered, config):
    plan = plan_upgrade(NEW, cluster_of(observed))
    assert plan.parts == rendered
    assert plan.config == config
    assert plan.refused is None
    assert plan.condition().reason == "Upgrading" and NEW in plan.condition().message


def test_the_upgrade_is_over_when_every_part_runs_the_new_release():
    plan = plan_upgrade(NEW, cluster_of({p: on(NEW) for p in ("accounting", "controller", "workers", "login")}))
    assert plan.config == NEW and plan.waiting is None
    assert (plan.condition().ok, plan.condition().reason) == (True, "Current")
    assert plan.status() == {"wanted": NEW, "config": NEW, "accounting": [NEW], "controller": [NEW],
                             "workers": [NEW], "login": [NEW]}


@pytest.mark.parametrize("running, wanted, words", [
    ("26.05", "24.11", ["downgrade", "26.05", "24.11"]),
    ("23.02", "26.05", ["23.02", "26.05", "jumps 6 releases"]),
    ("24.11", "27.05", ["24.11", "27.05", "jumps 5 releases"]),
])
def test_a_downgrade_or_too_long_a_jump_is_refused_naming_both(running, wanted, words):
    plan = plan_upgrade(wanted, cluster_of({"controller": on(running), "workers": on(running)}))
    assert plan.refused and all(w in plan.refused for w in words), plan.refused
    cond = plan.condition()
    assert (cond.ok, cond.reason) == (False, "UpgradeRefused")
    assert plan.parts["controller"] == running  # nothing is rendered for the wanted release


def test_going_back_in_the_middle_of_an_upgrade_is_refused():
    """slurmdbd converted the database already: no way back to 24.11."""
    plan = plan_upgrade(OLD, cluster_of({"accounting": on(NEW), "controller": on(OLD), "workers": on(OLD)}))
    assert plan.refused and "downgrade from Slurm 26.05 to 24.11" in plan.refused


def test_a_waiting_part_keeps_its_live_image_and_release():
    spec = {"metadata": {"name": "c"}, "spec": {"slurmVersion": NEW, "images": {"controller": "registry.example/ctl:new"},
                                                 "nodeSets": [{"name": "cpu", "image": "registry.example/w:new"}]}}
    cluster = SlurmCluster.model_validate(spec)
    observed = cluster_of({"accounting": on(NEW, name="c-slurmdbd"), "controller": on(OLD, image="registry.example/ctl:old"),
                           "workers": on(OLD, image="registry.example/w:old", name="c-cpu"), "login": on(OLD, name="c-login")})
    plan = plan_upgrade(NEW, observed)
    controller = part_cluster(cluster, plan, "controller")
    assert controller is cluster  # its turn: the spec as it is
    workers = part_cluster(cluster, plan, "workers")
    assert workers.spec.slurm_version == OLD and workers.spec.node_sets[0].image == "registry.example/w:old"
    assert part_cluster(cluster, plan, "config").spec.slurm_version == OLD
    assert cluster.spec.node_sets[0].image == "registry.example/w:new"  # the spec itself is untouched


def test_the_jails_clients_keep_the_config_until_the_jail_is_refilled():
    """Every daemon on 26.05, the jail still populated from 24.11: its sbatch and sacct read slurm.conf
    too, so the config stays 24.11's, and the condition says how the jail moves."""
    daemons = cluster_of({p: on(NEW) for p in ("accounting", "controller", "workers", "login")})
    plan = plan_upgrade(NEW, daemons, jail=OLD)
    assert plan.config == OLD and plan.waiting is None
    cond = plan.condition()
    assert (cond.ok, cond.reason) == (True, "JailClientsOlder") and "populateJail.overwrite" in cond.message
    assert plan.status()["jail"] == [OLD]
    assert plan_upgrade(NEW, daemons, jail=NEW).condition().reason == "Current"
    assert plan_upgrade(NEW, daemons, jail=NEW).config == NEW


def test_a_jail_too_old_for_the_wanted_release_is_refused():
    plan = plan_upgrade("27.05", cluster_of({p: on(NEW) for p in ("controller", "workers")}), jail=OLD)
    assert plan.refused and "24.11 to 27.05" in plan.refused


def test_a_pod_an_older_operator_made_counts_as_24_11():
    """Objects made before releases were labelled: every soperator release until then ran 24.11 only,
    so a cluster of it, under this operator's default of 26.05, upgrades rather than being re-rendered."""
    from soperator.reconcile.upgrade import release_of

    assert release_of({"metadata": {"labels": {"app.kubernetes.io/name": "soperator"}}}) == OLD
    assert release_of({"metadata": {"labels": {"slurm.soperator.dev/slurm-release": NEW}}}) == NEW
    plan = plan_upgrade(NEW, cluster_of({"controller": on(release_of({"metadata": {}})), "workers": on(OLD)}))
    assert plan.parts["controller"] == NEW and plan.parts["workers"] == OLD and plan.config == OLD
