"""The elastic node-set planner as a table: Slurm's power states and the pods in, the size and the
power requests out. The real slurmctld proves the loop (tests/kube/test_autoscale.py)."""
from __future__ import annotations

from soperator.api.spec import Autoscale
from soperator.node.drains import SCALE_IN, SLURM_RESUME_TIMEOUT, START_FAILED
from soperator.node.layout import ENV
from soperator.reconcile.autoscale import PodStart, mode_changes, plan_autoscale, pod_start
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


def _pods(*ordinals: int, age: int = 5, problem: str = "") -> dict[str, PodStart]:
    """Pods of these ordinals, each created `age` seconds ago."""
    return {f"{P}-{i}": PodStart(NOW - age, problem) for i in ordinals}


def _plan(live, pods, nodes, scale=SCALE, hold=False):
    return plan_autoscale(P, scale, live, pods, nodes, NOW, hold)


def test_from_zero_nothing_runs_until_slurm_powers_a_node_up_for_a_job():
    plan = _plan(None, {}, _nodes(DOWN, DOWN, DOWN, DOWN))
    assert (plan.replicas, plan.power_up, plan.power_down, plan.powered_down) == (0, [], [], 4)
    plan = _plan(0, {}, _nodes("ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP", DOWN, DOWN, DOWN))
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
    plan = _plan(None, {}, _nodes(DOWN, DOWN, DOWN, DOWN), scale)
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
    assert _plan(None, {}, None, Autoscale(min=1, max=2)).replicas == 1
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


UP = "ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP"


def test_a_worker_that_does_not_start_within_resume_timeout_is_given_up_with_why():
    scale = Autoscale(max=4, resume_timeout=60)
    waiting = _nodes(UP, UP, DOWN, DOWN)
    pods = {**_pods(0, age=61, problem="0/3 nodes are available: 3 Insufficient nvidia.com/gpu."), **_pods(1, age=59)}
    plan = _plan(2, pods, waiting, scale)
    assert plan.give_up == {f"{P}-0": f"{START_FAILED} in 60s: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}
    assert plan.replicas == 2  # until Slurm has it down: the pod stays this pass
    # No resumeTimeout: Slurm's own limit is the only one.
    assert _plan(2, pods, waiting).give_up == {}
    # Registered in time: nothing to give up.
    assert _plan(2, pods, _nodes("ALLOCATED+CLOUD", UP, DOWN, DOWN), scale).give_up == {}


def test_a_given_up_record_lets_its_pod_go_and_is_powered_down_once_the_pod_is_gone():
    ours = f"DOWN+CLOUD+NOT_RESPONDING+POWERING_UP:{START_FAILED} in 60s: image pull"
    plan = _plan(1, _pods(0, age=90), _nodes(ours, DOWN, DOWN, DOWN), Autoscale(max=4, resume_timeout=60))
    assert (plan.replicas, plan.give_up, plan.power_down) == (0, {}, [])
    plan = _plan(0, {}, _nodes(ours, DOWN, DOWN, DOWN))
    assert (plan.replicas, plan.power_down) == (0, [f"{P}-0"])
    # Slurm's own ResumeTimeout leaves the record down and powered down: it too is made idle again,
    # while an admin's down stays as it is.
    plan = _plan(0, {}, _nodes(f"DOWN+CLOUD+POWERED_DOWN:{SLURM_RESUME_TIMEOUT}", "DOWN+CLOUD+POWERED_DOWN:admin: psu",
                               "IDLE+CLOUD+POWERING_DOWN", DOWN))
    assert plan.power_down == [f"{P}-0"]
    # Powering down already: not asked again.
    assert _plan(0, {}, _nodes(f"IDLE+CLOUD+POWERING_DOWN:{START_FAILED} in 60s", DOWN, DOWN, DOWN)).power_down == []


def test_what_holds_a_pod_back_is_read_from_its_status():
    unschedulable = {"metadata": {"creationTimestamp": "2027-01-15T08:00:00Z"}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}]}}
    assert pod_start(unschedulable) == PodStart(1_800_000_000.0, "0/1 nodes are available")
    pulling = {"metadata": {"creationTimestamp": "2027-01-15T08:00:00Z"}, "status": {
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "initContainerStatuses": [{"name": "munge", "state": {"running": {}}}],
        "containerStatuses": [{"name": "slurmd", "state": {"waiting": {"reason": "ImagePullBackOff"}}},
                              {"name": "sidecar", "state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    assert pod_start(pulling).problem == "container slurmd: ImagePullBackOff"
