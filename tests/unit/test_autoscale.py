"""The elastic node-set planner as a table: Slurm's power states and the pods in, the size and the
power requests out. The real slurmctld proves the loop (tests/kube/test_autoscale.py)."""
from __future__ import annotations

from soperator.api.spec import Autoscale
from soperator.node.drains import SCALE_IN
from soperator.node.layout import ENV
from soperator.reconcile.autoscale import mode_changes, plan_autoscale
from soperator.slurm import SlurmNode
from tests.conftest import make_cluster

P = "demo-cpu"
NOW = 1_800_000_000
SCALE = Autoscale(min=0, max=4, idle_seconds=60)
DOWN = "IDLE+CLOUD+POWERED_DOWN"


def _nodes(*states: str, busy_ago: int = 10) -> dict[str, SlurmNode]:
    """Per ordinal `BASE+FLAGS[:reason]`; each last busy `busy_ago` seconds ago (none when powered down)."""
    out = {}
    for i, state in enumerate(states):
        base, _, reason = state.partition(":")
        flags = base.split("+")
        out[f"{P}-{i}"] = SlurmNode(name=f"{P}-{i}", state=flags, reason=reason,
                                    last_busy=None if "POWERED_DOWN" in flags else NOW - busy_ago)
    return out


def _pods(*ordinals: int) -> set[str]:
    return {f"{P}-{i}" for i in ordinals}


def _plan(live, pods, nodes, scale=SCALE, hold=False):
    return plan_autoscale(P, scale, live, pods, nodes, NOW, hold)


def test_from_zero_nothing_runs_until_slurm_powers_a_node_up_for_a_job():
    plan = _plan(None, set(), _nodes(DOWN, DOWN, DOWN, DOWN))
    assert (plan.replicas, plan.power_up, plan.power_down, plan.powered_down) == (0, [], [], 4)
    plan = _plan(0, set(), _nodes("ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP", DOWN, DOWN, DOWN))
    assert (plan.replicas, plan.waiting) == (1, [f"{P}-0"]) and "jobs wait" in plan.reason


def test_the_size_reaches_the_highest_node_in_use_and_keeps_the_ones_below():
    nodes = _nodes("IDLE+CLOUD", DOWN, "ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP", DOWN, busy_ago=600)
    assert _plan(1, _pods(0), nodes).replicas == 3  # ordinal 1 gets a pod too: a StatefulSet has no gaps


def test_a_node_is_released_only_after_the_idle_time_and_never_while_busy():
    plan = _plan(2, _pods(0, 1), _nodes("IDLE+CLOUD", "IDLE+CLOUD", DOWN, DOWN, busy_ago=59))
    assert plan.replicas == 2 and plan.idle == dict.fromkeys((f"{P}-0", f"{P}-1"), NOW - 59)
    plan = _plan(2, _pods(0, 1), _nodes("ALLOCATED+CLOUD", "IDLE+CLOUD", DOWN, DOWN, busy_ago=61))
    assert (plan.replicas, plan.idle) == (1, {})
    assert _plan(2, _pods(0, 1), _nodes("IDLE+CLOUD", "MIXED+CLOUD", DOWN, DOWN, busy_ago=600)).replicas == 2
    # Busy below an idle one: the idle top goes, the StatefulSet cannot give back a middle ordinal.
    assert _plan(3, _pods(0, 1, 2), _nodes("IDLE+CLOUD", "ALLOCATED+CLOUD", "IDLE+CLOUD", DOWN,
                                           busy_ago=600)).replicas == 2


def test_min_is_kept_and_powered_up_before_its_pods_start():
    scale = Autoscale(min=2, max=4, idle_seconds=60)
    plan = _plan(None, set(), _nodes(DOWN, DOWN, DOWN, DOWN), scale)
    assert (plan.replicas, plan.power_up) == (2, [f"{P}-0", f"{P}-1"])
    # Asked already: no second request, and the node counts as needed.
    plan = _plan(2, _pods(0, 1), _nodes("IDLE+CLOUD+POWER_UP+POWERED_DOWN", "IDLE+CLOUD", DOWN, DOWN, busy_ago=600), scale)
    assert (plan.replicas, plan.power_up) == (2, []) and plan.reason.startswith("at min (2)")


def test_released_records_are_powered_down_once_their_pods_are_gone_unless_someone_else_drained_them():
    nodes = _nodes("IDLE+CLOUD", f"IDLE+CLOUD+DRAIN:{SCALE_IN} of node set cpu", "DOWN+CLOUD+DRAIN:admin: bad fan",
                   "DOWN+CLOUD", busy_ago=600)
    assert _plan(1, _pods(0, 1), nodes).power_down == [f"{P}-3"]  # 1's pod still stopping
    assert _plan(1, _pods(0), nodes).power_down == [f"{P}-1", f"{P}-3"]
    assert _plan(2, _pods(0, 1), nodes).replicas == 0  # the released ones: nothing keeps them


def test_unknown_slurm_and_maintenance_keep_the_size():
    assert _plan(3, _pods(0, 1, 2), None).replicas == 3
    assert _plan(None, set(), None, Autoscale(min=1, max=2)).replicas == 1
    plan = _plan(2, _pods(0, 1), _nodes("IDLE+CLOUD+DRAIN:soperator: maintenance", "IDLE+CLOUD", DOWN, DOWN,
                                        busy_ago=600), hold=True)
    assert (plan.replicas, plan.power_down) == (2, []) and plan.reason.startswith("maintenance")


def _live(cloud: bool, replicas: int) -> dict:
    env = [{"name": ENV.cloud_node, "value": "true"}] if cloud else [{"name": ENV.slurmd_conf, "value": "CPUs=1"}]
    return {"spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "slurmd", "env": env}]}}},
            "status": {"replicas": replicas}}


def test_a_node_set_switches_between_replicas_and_autoscale_only_at_zero_workers():
    fixed, elastic = make_cluster(nodeSets=[{"name": "cpu"}]), make_cluster(nodeSets=[{"name": "cpu", "autoscale": {"max": 2}}])
    (refused,) = mode_changes(elastic.spec.node_sets, {"cpu": _live(False, 2)})
    assert refused.startswith("spec.nodeSets[0].autoscale: node set cpu runs workers sized by replicas") and \
        "replicas: 0" in refused
    (refused,) = mode_changes(fixed.spec.node_sets, {"cpu": _live(True, 1)})
    assert "sized by autoscale" in refused and "autoscale.min: 0" in refused
    assert mode_changes(elastic.spec.node_sets, {"cpu": _live(False, 0)}) == []  # at zero: free to switch
    assert mode_changes(elastic.spec.node_sets, {"cpu": _live(True, 2)}) == []
    assert mode_changes(elastic.spec.node_sets, {}) == []
