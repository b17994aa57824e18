"""Workers in a user namespace of their own (`nodeSets[].hostUsers: false`) on the test node, through
the quick start: the kubelet maps the pod's ids onto a range of node ids above every host user's, so
root in a job step there is root in the jail only. This node mounts cgroup v1, where a user-namespaced
worker cannot confine another user's tasks (soperator/node/cgroups.py refuses it, unit-tested): the
cluster runs without Slurm's cgroup plugins. The login node is user-namespaced too (spec.login.hostUsers:
false): root in an ssh session is an unprivileged id on the node, and each user's sessions are confined
in cgroups the delegate handed to the pod (a root-owned process moved, which v1 allows in a user
namespace). The worker's node set runs Pyxis: images unpacked, or
imported by its image cache from a registry on the node; mounting them (squashfuse) needs a /dev/fuse
that the node opens to others, which this node's is not (no udev here): that worker refuses to start,
and the cluster says why."""
from __future__ import annotations

import json
import os
import stat
import subprocess

import paramiko
import pytest

from images.build import build_all, image_ref
from tests.cluster.controlplane import free_port
from tests.cluster.node import NODE_IP
from tests.kube.conftest import adopt_crd
from tests.support.enroot_host import bookworm_image
from tests.support.image_registry import Registry
from tests.support.jail_root import node_files_stay_the_nodes
from tests.support.quickstart_run import module_namespace, new_ssh_key, quickstart_login, quickstart_uninstall
from tests.support.ssh_session import connect, run
from tests.support.user_namespace import container_jobs_run, delegated, image_in_jail, root_step_is_unprivileged
from tests.support.wait import until

pytestmark = [pytest.mark.kube, pytest.mark.e2e]
IMAGES = ("controller", "worker", "login", "populate-jail", "operator")
NAME = "own"
WORKER = f"{NAME}-userns-0"
LOGIN = f"{NAME}-login-0"
# Each ssh user's sessions together: small enough for a hog to meet quickly.
LOGIN_SPEC = {"hostUsers": False, "sessionLimits": {"memory": "256Mi", "cpu": "500m"}}
NO_CGROUPS = {"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/affinity"}
# The image cache pulls from the test's registry, which serves plain HTTP.
PYXIS = {"enabled": True, "storageSize": "2Gi", "enrootConfig": {"ENROOT_ALLOW_HTTP": "yes"}}


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
    values.write_text(json.dumps({"spec": {"slurmConfig": NO_CGROUPS, "login": LOGIN_SPEC, "nodeSets": [
        {"name": "userns", "replicas": 1, "hostUsers": False, "pyxis": PYXIS}]}}))
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
    node_files_stay_the_nodes(login, WORKER)
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


# Root's session says who it is, how the pod's ids map onto the node's, and whether it reaches two of
# the node's kernel interfaces or mounts anything.
ROOT_SESSION = ("id -u; cat /proc/self/uid_map; [ -w /proc/sys/kernel/core_pattern ] && echo core-pattern-writable; "
                "(echo h > /proc/sysrq-trigger) 2>&1; mount -t tmpfs none /mnt 2>&1 || echo mount-refused")


def test_root_in_an_ssh_session_on_a_user_namespaced_login_node_is_an_unprivileged_id(cluster, node, kubectl,
                                                                                      namespace):
    """sshd runs as the login pod's root, the first id of its range on the node; root's session (in
    the jail, its own procfs mounted and masked by the jail plugin) writes none of the node's kernel
    interfaces and mounts nothing; the delegate handed the login container its cgroups."""
    out = cluster.run(ROOT_SESSION)
    lines = out.splitlines()
    inside, first_host, length = (int(v) for v in lines[1].split())
    assert lines[0] == "0" and inside == 0 and length == 65536 and first_host >= 65536, out
    assert "core-pattern-writable" not in out and "sysrq-trigger" in lines[2] and lines[-1] == "mount-refused", out
    pod = json.loads(kubectl("-n", namespace, "get", "pod", LOGIN, "-o", "json").stdout)
    assert pod["spec"]["hostUsers"] is False
    sshd = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "sshd")
    assert _host_uid(node.task_pid(sshd["containerID"])) == first_host
    delegated(kubectl, namespace, LOGIN, sshd["containerID"], first_host)


def test_each_users_sessions_on_a_user_namespaced_login_node_are_confined(cluster, kubectl, namespace, tmp_path):
    """The session limits in a user namespace, on cgroup v1: a user's sessions share the user's cgroup
    with the spec's limit, where a memory hog is killed by the kernel while another user's session,
    with a command running, lives on."""
    login = cluster
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "key")], check=True)
    public = (tmp_path / "key.pub").read_text().strip()
    for user, uid in (("lena", 2011), ("omar", 2012)):
        login.run(f"id -u {user} >/dev/null 2>&1 || useradd -m -u {uid} -s /bin/bash {user}; runuser -u {user} -- "
                  f"sh -c 'umask 077 && mkdir -p ~/.ssh && echo \"{public}\" > ~/.ssh/authorized_keys'")
    key = paramiko.Ed25519Key.from_private_key_file(str(tmp_path / "key"))
    port = int(kubectl("-n", namespace, "get", "service", f"{NAME}-login", "-o",
                       "jsonpath={.spec.ports[0].nodePort}").stdout)
    lena, omar = (connect(NODE_IP, port, user, key) for user in ("lena", "omar"))
    try:
        running = omar.get_transport().open_session()
        running.exec_command("echo started; sleep 600")
        assert running.makefile().readline().strip() == "started"
        memory = run(lena, "grep :memory: /proc/self/cgroup; cat /sys/fs/cgroup/memory/users/2011/memory.limit_in_bytes")
        assert memory[1].split()[0].endswith("/users/2011") and memory[1].split()[1] == str(256 * 2**20), memory
        code, _, err = run(lena, "head -c 600M /dev/zero | tail")
        assert code == 137, (code, err)  # SIGKILL, from the OOM killer in lena's cgroup
        assert not running.exit_status_ready()  # omar's command runs on
        assert run(omar, "echo alive")[:2] == (0, "alive\n")
    finally:
        lena.close()
        omar.close()


@pytest.fixture
def registry_image(tmp_path):
    """A registry on the node's address (pods reach it through the bridge's gateway), Debian 12 pushed
    into it; yields the image as a Pyxis argument."""
    registry = Registry(tmp_path / "registry", NODE_IP, free_port())
    registry.start()
    try:
        registry.push(bookworm_image(tmp_path), "bookworm:12")
        yield f"{registry.host}#bookworm:12"
    finally:
        registry.stop()


def test_container_jobs_run_for_root_and_a_user_unpacked_and_from_the_image_cache(
        cluster, local_cluster, kubectl, namespace, tmp_path, registry_image):
    """Pyxis in a user namespace: enroot maps root's container to root, which needs CAP_SETFCAP (the
    pod's own user namespace's: the worker's, kept by root's tasks on Pyxis workers only); a user's
    --container-remap-root is root inside only; a registry image is imported once, by the worker's
    cache (root's, in the user namespace), for both."""
    login = cluster
    image = image_in_jail(local_cluster.volumes / f"{namespace}-{NAME}-jail", tmp_path)
    login.run("id -u dana >/dev/null 2>&1 || useradd -m -u 2004 -s /bin/bash dana")
    for source in (image, registry_image):
        container_jobs_run(login, WORKER, source, "dana", 2004)
    cached = kubectl("-n", namespace, "exec", WORKER, "-c", "slurmd", "--", "ls", "/run/enroot/images").stdout.split()
    assert len(cached) == 1 and cached[0].endswith(".sqsh"), cached
    imports = [line for line in kubectl("-n", namespace, "logs", WORKER, "-c", "slurmd").stdout.splitlines()
               if "image cache: " in line and ": imported in " in line]
    assert len(imports) == 1 and "for root (uid 0)" in imports[0], imports  # root's job came first


def _workers_ready(kubectl, namespace) -> dict:
    body = json.loads(kubectl("-n", namespace, "get", "slurmcluster", NAME, "-o", "json").stdout)
    return next((c for c in body.get("status", {}).get("conditions", []) if c["type"] == "WorkersReady"), {})


@pytest.mark.skipif(stat.S_IMODE(os.stat("/dev/fuse").st_mode) & 0o006 == 0o006,
                    reason="this node's /dev/fuse is open to others (a udev rule): a worker would mount images")
def test_a_worker_to_mount_images_through_the_nodes_closed_dev_fuse_refuses_and_the_cluster_names_the_node(
        cluster, kubectl, namespace):
    """Last: the node set changes. With images mounted the worker asks for /dev/fuse, and in a user
    namespace the runtime binds the node's own device, which no id of the pod owns: at this node's
    0600 neither root nor a user could open it, so the worker refuses before slurmd starts and
    WorkersReady names the node and the mode. Mounting turned off again, the worker serves again."""
    mode = f"{stat.S_IMODE(os.stat('/dev/fuse').st_mode):04o}"
    patch = lambda mount: kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p",  # noqa: E731
                                  json.dumps({"spec": {"plugStack": {"pyxis": {"mountImages": mount}}}}))
    patch(True)
    try:
        until(lambda: _workers_ready(kubectl, namespace).get("reason") == "FuseUnavailable", 300,
              "WorkersReady to name the closed /dev/fuse")
        message = _workers_ready(kubectl, namespace)["message"]
        assert f"{WORKER}: node soperator-node: its /dev/fuse is mode {mode}" in message, message
    finally:
        patch(False)
    until(lambda: _workers_ready(kubectl, namespace).get("status") == "True", 300, "the worker serving again")
