"""Workers in a user namespace of their own (`nodeSets[].hostUsers: false`) on the test node, through
the quick start: the kubelet maps the pod's ids onto a range of node ids above every host user's, so
root in a job step there is root in the jail only. This node mounts cgroup v1, where a user-namespaced
worker cannot confine another user's tasks (soperator/node/cgroups.py refuses it, unit-tested): the
cluster runs without Slurm's cgroup plugins."""
from __future__ import annotations

import json
import os

import pytest

from images.build import build_all, image_ref
from tests.kube.conftest import adopt_crd
from tests.support.quickstart_run import module_namespace, new_ssh_key, quickstart_login, quickstart_uninstall
from tests.support.user_namespace import delegated, root_step_is_unprivileged

pytestmark = [pytest.mark.kube, pytest.mark.e2e]
IMAGES = ("controller", "worker", "login", "populate-jail", "operator")
NAME = "own"
WORKER = f"{NAME}-userns-0"
NO_CGROUPS = {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/affinity"}


@pytest.fixture(scope="module")
def namespace(kubectl):
    yield from module_namespace(kubectl, "user-namespaced")


@pytest.fixture(scope="module")
def cluster(local_cluster, node, tools, kubectl, crd_installed, namespace, tmp_path_factory):
    """The quick start with one user-namespaced worker; yields root's ssh session on the login node."""
    build_all()
    node.import_images([image_ref(name) for name in IMAGES])
    adopt_crd(kubectl, "soperator", namespace)
    work = tmp_path_factory.mktemp("user-namespaced")
    key_file = new_ssh_key(work)
    values = work / "values.json"
    values.write_text(json.dumps({"spec": {"slurmConfig": NO_CGROUPS, "nodeSets": [
        {"name": "userns", "replicas": 1, "hostUsers": False}]}}))
    login = quickstart_login(local_cluster, tools, kubectl, namespace, NAME, key_file, "--timeout", "600",
                             "--values", str(values), "--set-operator", "cgroupDelegate.enabled=true", timeout=900)
    yield login
    login.close()
    quickstart_uninstall(local_cluster, tools, namespace, NAME)


def _host_uid(pid: int) -> int:
    status = open(f"/proc/{pid}/status").read()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def test_root_in_a_job_step_is_an_unprivileged_id_on_the_node(cluster, node, kubectl, namespace):
    """Root's step runs in the jail (the jail plugin mounted and masked its procfs on the pod's unmasked
    /proc) as the pod's root, which the node knows as the first id of the pod's range: it writes none of
    the node's kernel interfaces, and the worker's slurmd runs as that id on the node."""
    login = cluster
    first_host, os_release = root_step_is_unprivileged(login, WORKER)
    assert os_release == login.run("head -1 /etc/os-release").strip()  # the jail's, as on the login node
    pod = json.loads(kubectl("-n", namespace, "get", "pod", WORKER, "-o", "json").stdout)
    assert pod["spec"]["hostUsers"] is False
    slurmd = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "slurmd")
    assert _host_uid(node.task_pid(slurmd["containerID"])) == first_host


def test_the_cgroup_delegate_gives_the_worker_its_own_cgroups_and_nothing_more(cluster, node, kubectl, namespace):
    """The operator chart's DaemonSet on the real kubelet (hostPID, the node's cgroups, CHOWN only): the
    worker container's own cgroup directory and cgroup.procs become the pod root's node id, its limit
    files stay the node's root's. (No cgroup plugin uses them here: on cgroup v1 the worker refuses them.)"""
    pod = json.loads(kubectl("-n", namespace, "get", "pod", WORKER, "-o", "json").stdout)
    slurmd = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "slurmd")
    cid = slurmd["containerID"].split("://", 1)[1]
    first_host = _host_uid(node.task_pid(slurmd["containerID"]))
    delegated(kubectl, namespace, WORKER, cid, first_host)
    memory = next(line.split(":", 2)[2] for line in
                  open(f"/proc/{node.task_pid(slurmd['containerID'])}/cgroup").read().splitlines() if ":memory:" in line)
    directory = f"/sys/fs/cgroup/memory{memory}"
    assert directory.endswith(cid)
    assert os.stat(directory).st_uid == os.stat(f"{directory}/cgroup.procs").st_uid == first_host
    assert os.stat(f"{directory}/memory.limit_in_bytes").st_uid == 0


def test_a_users_step_runs_there_as_the_user_and_writes_the_jail_as_the_user(cluster, local_cluster, namespace):
    """The jail's volume is mounted idmapped: what the user writes from the user-namespaced worker is
    the user's on the disk too, as from any other node."""
    login = cluster
    login.run("id -u dana >/dev/null 2>&1 || useradd -m -u 2004 -s /bin/bash dana")
    out = login.run(f"cd /tmp && runuser -u dana -- srun -w {WORKER} sh -c 'id -u; touch /home/dana/from-userns; "
                    "stat -c %u /home/dana/from-userns'")
    assert out.split() == ["2004", "2004"], out
    on_disk = local_cluster.volumes / f"{namespace}-{NAME}-jail" / "home" / "dana" / "from-userns"
    assert on_disk.stat().st_uid == 2004
