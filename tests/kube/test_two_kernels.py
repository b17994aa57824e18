"""The user's path across two nodes on two kernels: the host node (cgroup v1) and the VM node (cgroup
v2, tests/cluster/vm_node.py). The quick start with `--nodes 2` puts the login, the controller and a
worker on the host and one more node set, `emulated`, on the VM; a user who ssh'es to the login node
on the host runs a job step on the VM, and a two-node `srun` spans both kernels, every step in the
one jail both nodes mount. Each Kubernetes node is its own leaf switch of spec.topology: each worker
registers at its place, which the operator writes on its pod and the kubelet shows it.

The cluster runs the CR's Slurm defaults (proctrack/cgroup, task/cgroup,task/affinity, ConstrainCores,
ConstrainRAMSpace, ConstrainDevices) on unprivileged workers, and jobs are confined on both kernels:
over its memory a job ends OUT_OF_MEMORY while its neighbour runs on, a task runs on its allocated
CPUs only, and a job opens a gres's device file only when it was given that gres. A login node's
per-user cgroup tree works on cgroup v2 too (last: it adds a cgroup tree to the VM worker's).

A third node set, `userns`, runs on the VM in a user namespace of its own (hostUsers: false; the jail
mounted idmapped over virtio-fs), its cgroup handed to its root by the operator chart's cgroup
delegate: there Slurm's cgroup plugins confine root's jobs and every other user's (which cgroup v1
cannot do, tests/kube/test_user_namespaced_worker.py), and root in a step is an unprivileged id on
the VM. It is a Pyxis node set that mounts images (the VM's /dev/fuse is 0666, as udev makes it):
root's and a user's container jobs run there."""
from __future__ import annotations

import json
import os

import pytest

from images.build import build_all, image_ref
from tests.cluster.node import NODE_NAME
from tests.cluster.vm_node import NAME as VM_NAME
from tests.cluster.vm_node import TOLERATION
from tests.kube.conftest import adopt_crd
from tests.support.jail_root import node_files_stay_the_nodes
from tests.support.quickstart_run import module_namespace, new_ssh_key, quickstart_login, quickstart_uninstall
from tests.support.ssh_session import Login
from tests.support.user_namespace import container_jobs_run, delegated, image_in_jail, root_step_is_unprivileged
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.e2e]
IMAGES = ("controller", "worker", "login", "populate-jail", "operator", "database")
NAME = "two"
HOST_WORKER, VM_WORKER, USERNS_WORKER = f"{NAME}-worker-0", f"{NAME}-emulated-0", f"{NAME}-userns-0"
# Both VM workers fit its memory: RealMemory 600 MiB (jobs here ask for 100M) and the daemons beside.
VM_MEMORY = {"realMemoryMib": 600}
ON_VM = {"scheduling": {"nodeSelector": {"kubernetes.io/hostname": VM_NAME}, "tolerations": [TOLERATION]}}
# Images mounted (squashfuse through the node's /dev/fuse), no registry: no image cache.
USERNS_PYXIS = {"enabled": True, "storageSize": "2Gi", "imageCache": {"enabled": False}}
# The CR's own Slurm defaults (the quick start's too), named here so that the test holds them.
CR_DEFAULTS = {"proctrackType": "proctrack/cgroup", "taskPlugin": "task/cgroup,task/affinity"}
# A harmless device as the test gres's file: a job that was not given the gres cannot open it.
TEST_GRES = {"gres": ["testdev:1"], "gresFiles": {"testdev": "/dev/full"}}
# Each step says where it ran: its host, its kernel, the type of its cgroup file system, and what it
# read of a file the login session wrote into the jail.
# A tree of one level: each Kubernetes node its own leaf switch, from a label the test sets.
LEAF = "topology.soperator.test/leaf"
LEAVES = {NODE_NAME: "host-leaf", VM_NAME: "vm-leaf"}
STEP = ("echo \"$(hostname) $(uname -r) $(stat -fc %T /sys/fs/cgroup) $(cat /root/across/from-login)\" "
        "> /root/across/$(hostname)")


@pytest.fixture(scope="module")
def two_nodes(local_cluster, node):
    build_all()
    node.import_images([image_ref(name) for name in IMAGES])
    yield local_cluster.start_vm([image_ref("worker"), image_ref("operator")])  # the operator's: the delegate
    local_cluster.vm.stop()


@pytest.fixture(scope="module")
def namespace(kubectl):
    yield from module_namespace(kubectl, "two-kernels")


@pytest.fixture(scope="module")
def cluster(two_nodes, local_cluster, tools, kubectl, crd_installed, namespace, tmp_path_factory):
    """The quick start's two-node cluster with the CR's cgroup defaults, two CPUs and the test gres on
    each worker; yields root's ssh session on the login node."""
    adopt_crd(kubectl, "soperator", namespace)
    work = tmp_path_factory.mktemp("two-kernels")
    key_file = new_ssh_key(work)
    values = work / "values.json"
    for host, leaf in LEAVES.items():
        kubectl("label", "node", host, "--overwrite", f"{LEAF}={leaf}")
    values.write_text(json.dumps({"spec": {"slurmConfig": CR_DEFAULTS, "topology": {"tree": {"levels": [LEAF]}},
                                           "plugStack": {"pyxis": {"mountImages": True}}, "nodeSets": [
        {"name": "worker", "replicas": 1, "cpus": 2, **TEST_GRES},
        {"name": "emulated", "replicas": 1, "cpus": 2, **TEST_GRES, **VM_MEMORY, **ON_VM},
        {"name": "userns", "replicas": 1, "cpus": 2, "hostUsers": False, "pyxis": USERNS_PYXIS, **VM_MEMORY,
         **ON_VM}]}}))
    login = quickstart_login(local_cluster, tools, kubectl, namespace, NAME, key_file, "--timeout", "1200", "--nodes", "2",
                             "--values", str(values), "--set-operator", "cgroupDelegate.enabled=true", timeout=1500)
    yield login
    login.close()
    for host in LEAVES:
        kubectl("label", "node", host, f"{LEAF}-")
    quickstart_uninstall(local_cluster, tools, namespace, NAME)


def test_a_job_spans_the_host_and_the_vm_in_one_jail(cluster, local_cluster, kubectl, namespace):
    pods = kubectl("-n", namespace, "get", "pods", "-o",
                   "jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{\"\\n\"}{end}").stdout
    placed = dict(line.split("=") for line in pods.split())
    assert placed[VM_WORKER] == placed[USERNS_WORKER] == VM_NAME
    assert placed[HOST_WORKER] == placed[f"{NAME}-login-0"] != VM_NAME

    login = cluster
    login.run("mkdir -p /root/across && echo written-at-login > /root/across/from-login")
    # A step on the VM alone, then one step on each kernel.
    login.run(f"srun -w {VM_WORKER} bash -c '{STEP}'")
    alone = login.run(f"cat /root/across/{VM_WORKER}").split()
    login.run(f"rm /root/across/{VM_WORKER}")
    login.run(f"srun -N2 -w {HOST_WORKER},{VM_WORKER} bash -c '{STEP}'")
    steps = {host: login.run(f"cat /root/across/{host}").split() for host in (HOST_WORKER, VM_WORKER)}
    login_kernel = login.run("uname -r").strip()
    emulated, host = steps[VM_WORKER], steps[HOST_WORKER]
    assert alone == emulated
    assert emulated[0] == VM_WORKER and emulated[2] == "cgroup2fs" and emulated[3] == "written-at-login"
    assert host[0] == HOST_WORKER and host[2] != "cgroup2fs" and host[3] == "written-at-login"
    assert host[1] == login_kernel == os.uname().release != emulated[1]  # two kernels
    # The VM's step wrote into the jail on the host's disk.
    jail = local_cluster.volumes / f"{namespace}-{NAME}-jail"
    assert (jail / "root" / "across" / VM_WORKER).read_text().split() == emulated


def test_each_worker_registered_at_its_kubernetes_nodes_place(cluster, kubectl, namespace):
    """spec.topology on a kubelet: the operator writes each bound worker's place on its pod, the
    kubelet shows it in the pod's downward API file, and slurmd registers there; no worker needed
    placing through slurmrestd afterwards (no NodePlaced event)."""
    login = cluster
    switches = {}
    for line in login.run("scontrol -o show topology").splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        switches[fields.get("SwitchName")] = fields.get("Nodes")
    assert switches["host-leaf"] == HOST_WORKER, switches
    assert login.run(f"scontrol show hostnames {switches['vm-leaf']}").split() == [VM_WORKER, USERNS_WORKER]
    for worker, host in ((HOST_WORKER, NODE_NAME), (VM_WORKER, VM_NAME), (USERNS_WORKER, VM_NAME)):
        log = kubectl("-n", namespace, "logs", worker, "-c", "slurmd").stdout
        assert f"topology: registering at default:_root:{LEAVES[host]}" in log, log[-3000:]
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert [e["message"] for e in events if e["reason"] == "NodePlaced"] == []


def _job_state(login: Login, job: str) -> str:
    """scontrol's word for the job while slurmctld remembers it (no accounting in this cluster)."""
    out = login.run(f"scontrol show job {job}")
    return out.split("JobState=", 1)[1].split()[0]


@pytest.mark.parametrize("worker", [HOST_WORKER, VM_WORKER, USERNS_WORKER])
def test_a_job_over_its_memory_ends_out_of_memory_and_its_neighbour_runs_on(cluster, worker):
    login = cluster
    neighbour = login.run(f"sbatch --parsable -w {worker} --mem=100M --wrap 'sleep 600'").strip()
    until(lambda: _job_state(login, neighbour) == "RUNNING", 300, f"the neighbour job on {worker} running")
    # `tail` keeps a line that never ends in memory: 300 MB, three times the job's memory.
    hog = login.run(f"sbatch --parsable -w {worker} --mem=100M --wrap 'head -c 300M /dev/zero | tail'").strip()
    until(lambda: _job_state(login, hog) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"), 600,
          f"the job over its memory on {worker} ending")
    try:
        assert _job_state(login, hog) == "OUT_OF_MEMORY"
        assert _job_state(login, neighbour) == "RUNNING"
    finally:
        login.run(f"scancel {neighbour}")


@pytest.mark.parametrize("worker", [HOST_WORKER, VM_WORKER, USERNS_WORKER])
@pytest.mark.parametrize("user", ["root", "carol"])
def test_a_task_runs_on_its_allocated_cpus_only(cluster, worker, user):
    """Also a user's: slurmstepd binds a task that already runs as the job's user (CAP_SYS_NICE; without
    it every non-root step failed to start and drained its node)."""
    login = cluster
    as_user = f"cd /tmp && runuser -u {user} --"
    if user != "root":
        login.run(f"id -u {user} >/dev/null 2>&1 || useradd -m -u 2003 -s /bin/bash {user}")
    shown = login.run(f"{as_user} srun -w {worker} -n1 -c1 grep Cpus_allowed_list /proc/self/status").split()[-1]
    whole = login.run(f"{as_user} srun -w {worker} -n1 -c2 grep Cpus_allowed_list /proc/self/status").split()[-1]
    assert "-" not in shown and "," not in shown  # one CPU
    assert shown != whole and shown in whole.replace("-", ",").split(",")


@pytest.mark.parametrize("worker", [HOST_WORKER, VM_WORKER])
def test_a_job_opens_a_gres_device_only_when_given_the_gres(cluster, worker):
    login = cluster
    probe = "head -c1 /dev/full > /dev/null 2>&1 && echo opened || echo refused"
    assert login.run(f"srun -w {worker} sh -c '{probe}'").strip() == "refused"
    assert login.run(f"srun -w {worker} --gres=testdev:1 sh -c '{probe}'").strip() == "opened"


# Each kernel's memory limit file of the task's own cgroup.
V2_LIMIT = "/sys/fs/cgroup$(grep ^0:: /proc/self/cgroup | cut -d: -f3)/memory.max"
LIMIT_FILES = {VM_WORKER: V2_LIMIT, USERNS_WORKER: V2_LIMIT,
               HOST_WORKER: "/sys/fs/cgroup/memory$(grep :memory: /proc/self/cgroup | cut -d: -f3)/memory.limit_in_bytes"}


@pytest.mark.parametrize("worker", [HOST_WORKER, VM_WORKER, USERNS_WORKER])
def test_root_in_a_job_cannot_raise_its_memory_limit(cluster, worker):
    """slurmstepd writes the job's cgroups; root's task sees them read-only (a mount namespace of its
    own, spank_chroot/cgroup_view.c). The file exists: the job's own cgroup, under the worker's mount."""
    login = cluster
    limit = LIMIT_FILES[worker]
    # The shell reports a redirection it cannot open on its stderr: the subshell's goes to stdout.
    out = login.run(f"srun -w {worker} --mem=100M sh -c '[ -f {limit} ] && echo present; "
                    f"(echo 999999999999 > {limit}) 2>&1; true'")
    assert out.startswith("present\n") and "Read-only file system" in out, out


@pytest.mark.parametrize("worker", [HOST_WORKER, VM_WORKER, USERNS_WORKER])
def test_root_in_a_job_cannot_change_what_the_nodes_daemons_read(cluster, worker):
    """slurmd's configless copy (slurmstepd loads plugstack.conf from it before the jail) and munged's
    socket directory are read-only in the jail, on each kind of worker."""
    node_files_stay_the_nodes(cluster, worker)


def test_on_cgroup_v2_a_user_namespaced_worker_confines_every_users_steps_as_an_unprivileged_id(
        cluster, local_cluster, kubectl, namespace):
    """hostUsers: false on the VM: the worker's pod root is the first id of its range on the VM, root's
    step writes none of the kernel's interfaces, a user's step runs in its own step cgroup (on cgroup v1
    the kernel refuses that move: the worker refuses cgroup plugins there) and writes the jail as that
    user on the host's disk (the jail is mounted idmapped, over virtio-fs); the chart's delegate gave
    that container's cgroup to exactly that id. Its jobs' memory and CPUs: the parametrized tests above."""
    login = cluster
    first_host, _ = root_step_is_unprivileged(login, USERNS_WORKER)

    login.run("id -u carol >/dev/null 2>&1 || useradd -m -u 2003 -s /bin/bash carol")
    step = login.run(f"cd /tmp && runuser -u carol -- srun -w {USERNS_WORKER} sh -c "
                     "'grep ^0:: /proc/self/cgroup; echo from-userns > /home/carol/from-userns'").strip()
    assert step.endswith("/step_0/user/task_0"), step
    written = local_cluster.volumes / f"{namespace}-{NAME}-jail" / "home" / "carol" / "from-userns"
    assert written.read_text() == "from-userns\n" and (written.stat().st_uid, written.stat().st_gid) == (2003, 2003)

    pod = json.loads(kubectl("-n", namespace, "get", "pod", USERNS_WORKER, "-o", "json").stdout)
    slurmd = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "slurmd")
    delegated(kubectl, namespace, USERNS_WORKER, slurmd["containerID"], first_host,
              "--field-selector", f"spec.nodeName={VM_NAME}")


def test_container_jobs_mount_their_image_on_a_user_namespaced_worker_for_root_and_a_user(
        cluster, local_cluster, kubectl, namespace, tmp_path):
    """Pyxis with hostUsers: false. enroot maps root's container to root, which needs CAP_SETFCAP (the
    pod's own user namespace's, the worker's only); the image is mounted through the VM's own /dev/fuse,
    which the runtime binds into the pod (0666 there, as udev makes it on the nodes users run); a user's
    --container-remap-root is root inside only. Nothing is unpacked for either."""
    login = cluster
    image = image_in_jail(local_cluster.volumes / f"{namespace}-{NAME}-jail", tmp_path)
    login.run("id -u carol >/dev/null 2>&1 || useradd -m -u 2003 -s /bin/bash carol")
    # The step's root is the overlay over the mounted image (unpacked, it would be the volume's own).
    assert container_jobs_run(login, USERNS_WORKER, image, "carol", 2003, "stat -f -c %T /") == ["overlayfs"] * 3
    data = [f"/run/enroot/user-{uid}/data" for uid in (0, 2003)]  # enroot's, on the worker's own volume
    assert kubectl("-n", namespace, "exec", USERNS_WORKER, "-c", "slurmd", "--", "ls", "-A", *data).stdout.split() == [
        f"{d}:" for d in data]


# The login node's per-user cgroup tree (soperator/node/session_limits.py) in the VM worker's container:
# two processes confined as two users' sessions are, one of them a hog. Prints what it saw, as JSON.
SESSIONS_PROBE = """
import json, os, subprocess
from soperator_node import session_limits as limits
limits.hand_down_v2()
hog = subprocess.Popen(["sh", "-c", "read go; head -c 400M /dev/zero | tail"], stdin=subprocess.PIPE)
neighbour = subprocess.Popen(["sleep", "300"])
limits.confine(hog.pid, 2011, 256 * 2**20, 500)
limits.confine(neighbour.pid, 2012, 256 * 2**20, 500)
read = lambda path: open(path).read().strip()
seen = {"hog": read(f"/proc/{hog.pid}/cgroup"), "neighbour": read(f"/proc/{neighbour.pid}/cgroup"),
        "memory.max": read("/sys/fs/cgroup/users/2011/memory.max"), "cpu.max": read("/sys/fs/cgroup/users/2011/cpu.max")}
hog.communicate(b"go\\n")
events = dict(line.split() for line in read("/sys/fs/cgroup/users/2011/memory.events").splitlines())
seen.update(hog_status=hog.returncode, oom_kills=int(events["oom_kill"]), neighbour_running=neighbour.poll() is None)
neighbour.kill()
neighbour.wait()
for uid in (2011, 2012):
    os.rmdir(f"/sys/fs/cgroup/users/{uid}")
print(json.dumps(seen))
"""


def test_a_login_users_cgroup_on_cgroup_v2_holds_the_users_hog_alone(cluster, kubectl, namespace):
    """What a login node does for each ssh user (spec.login.sessionLimits), on the kernel that mounts
    cgroup v2: in the VM worker's container (unprivileged, in a cgroup namespace of its own, as a login
    container is), the container's cgroup hands memory and cpu down to `users`, each user's process
    joins `users/<uid>` with the limits, and a hog over 256Mi is killed there by the kernel while the
    other user's process runs on. The whole ssh path (PAM, sshd, the jail's read-only view) is tested
    on the host's cgroup v1 in tests/kube/test_user_path.py."""
    out = kubectl("-n", namespace, "exec", VM_WORKER, "--", "python3", "-c", SESSIONS_PROBE).stdout
    seen = json.loads(out.splitlines()[-1])
    assert seen["hog"] == "0::/users/2011" and seen["neighbour"] == "0::/users/2012", seen
    assert seen["memory.max"] == str(256 * 2**20) and seen["cpu.max"] == "50000 100000", seen
    assert seen["hog_status"] == 137 and seen["oom_kills"] >= 1, seen
    assert seen["neighbour_running"], seen
