"""The user's whole path, on the real single-node Kubernetes (tests/cluster/local.py), as one test.

The quick start (examples/quickstart.py, given the node's kubeconfig, so only its product steps run:
`helm install` of the three charts, the phase-by-phase wait for Ready, ssh + sbatch) brings the
cluster up from our own images; the operator runs in cluster as the chart deploys it, populate-jail
as a real Job pod. Then, as a user: paramiko to the login NodePort, `sbatch -N2`, a second node set
with its own partition (jobs land where the partition says; adding and scaling it leaves the first
untouched), Slurm's view in the CR status and the pod conditions (read by the operator through
slurmrestd with its JWT) equal to sinfo's, a partition change that must reach every node with no pod
replaced, scale-in, an update and a controller restart under running jobs, scale to zero with a job
pending, a node set removed, workers killed under running jobs (their jobs requeued or failed, the
nodes back), accounting switched on (a job in sacct), a node set with Pyxis added and a container job
run on it, and `helm uninstall`, which must leave the jail and its data.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import paramiko
import pytest

from images.build import build_all, image_ref
from images.build import IMAGES as BUILD_ORDER
from images.podman import PodmanError
from soperator.node.drains import KUBE_NODE, START_FAILED
from soperator.node.layout import EVICTABLE_LABEL, FUSE_RESOURCE
from soperator.render.seccomp_profile import profile_json, pyxis_worker_profile_path
from tests.cluster.node import NODE_IP, NODE_NAME
from tests.kube.conftest import adopt_crd
from tests.kube.test_operator import scrape
from tests.support.enroot_host import bookworm_image, import_podman_image
from tests.support.job_reason import waits_for_nodes
from tests.support.quickstart_run import quickstart_up
from tests.support.ssh_session import Login, connect, run
from tests.support.wait import until
from tests.support_paths import ROOT

pytestmark = [pytest.mark.kube, pytest.mark.e2e]
IMAGES = ("controller", "worker", "login", "populate-jail", "operator", "database")
NAME = "up"
# Each step writes who it is, which root it sees (device:inode of /) and whether the kubelet's
# termination-log file reached it, into the shared jail.
JOB = """#!/bin/bash
#SBATCH -N2 -o /root/userpath/job-%j.out
srun bash -c 'echo "$(hostname) $(stat -c %d:%i /) $(test -e /dev/termination-log && echo seen || echo absent) \
$(cat /etc/soperator-jail-release)" > /root/userpath/$(hostname)'
"""


@pytest.fixture(scope="module")
def node_images(node) -> list[str]:
    """What the quick start tells a person waiting while the images build and import."""
    notes: list[str] = []
    try:
        build_all(progress=notes.append)
    except (PodmanError, OSError) as exc:
        pytest.fail(f"image build failed: {exc}", pytrace=False)
    node.import_images([image_ref(name) for name in IMAGES], progress=notes.append)
    return notes


def test_the_wait_for_images_says_which_image_and_how_far(node_images):
    built = [n for n in node_images if n.startswith("image ")]
    finals = [n for n in built if n.endswith(": up to date") or " built in " in n]
    assert len(finals) == len(BUILD_ORDER), node_images  # every image once, in build order
    assert [n.split()[2].rstrip(":") for n in finals] == list(BUILD_ORDER)
    assert all(n.split()[1] == f"{i}/{len(BUILD_ORDER)}" for i, n in enumerate(finals, 1))
    for n in built:
        if n.endswith("building (its inputs changed)"):  # a build tells its steps as they start
            head = n.rsplit(":", 1)[0]
            assert any(re.match(rf"{re.escape(head)}: (stage 1/\d+ )?step 1/", m) for m in built), node_images
    assert any(n.startswith("containerd holds ") and n.endswith(f"of the {len(IMAGES)} images already")
               for n in node_images), node_images


def test_helm_install_ssh_sbatch_scale_and_uninstall(node_images, local_cluster, tools, kubectl, crd_installed,
                                                    namespace, tmp_path, service_account_token, api):
    adopt_crd(kubectl, "soperator", namespace)
    key_file = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_file)], check=True)
    values = tmp_path / "values.json"
    values.write_text(json.dumps({"spec": {"login": {"sessionLimits": SESSION_LIMITS}}}))
    quickstart = quickstart_up(local_cluster, tools, namespace, NAME, key_file, "--timeout", "600",
                               "--values", str(values))
    state = kubectl("-n", namespace, "get", "slurmcluster,pods,jobs,statefulsets,pvc", "-o", "wide").stdout
    assert quickstart.returncode == 0, f"{quickstart.stdout}\n{quickstart.stderr}\n--- objects:\n{state}"
    # The script's own first job ran in the jail, through ssh to the NodePort.
    assert "soperator jail" in quickstart.stdout and f"root@{NODE_IP}" in quickstart.stdout
    jail = local_cluster.volumes / f"{namespace}-{NAME}-jail"
    job = json.loads(kubectl("-n", namespace, "get", "job", f"{NAME}-populate-jail", "-o", "json").stdout)
    assert job["status"]["succeeded"] == 1 and (jail / "etc" / "soperator-jail-release").exists()

    service = json.loads(kubectl("-n", namespace, "get", "service", f"{NAME}-login", "-o", "json").stdout)
    # kubectl's LOGIN column: the node a login pod runs on, with the NodePort: what the user ssh'es to.
    endpoint = f"{NODE_IP}:{service['spec']['ports'][0]['nodePort']}"
    until(lambda: kubectl("-n", namespace, "get", "slurmcluster", NAME, "-o", "jsonpath={.status.loginEndpoint}"
                          ).stdout == endpoint, 90, f"status.loginEndpoint {endpoint}")
    login = Login(NODE_IP, service["spec"]["ports"][0]["nodePort"],
                  paramiko.Ed25519Key.from_private_key_file(str(key_file)))
    try:
        login.write("/root/userpath/job.sh", JOB)
        job_id = login.run("sbatch --parsable --wait /root/userpath/job.sh").strip()
        assert "JobState=COMPLETED" in login.run(f"scontrol show job {job_id}")
        login_root = login.run("stat -c %d:%i /").strip()
        assert login.run("test -e /dev/termination-log && echo seen || echo absent").strip() == "absent"
        lines = {}
        for worker in (f"{NAME}-worker-0", f"{NAME}-worker-1"):
            # Visible from the login session: the same jail.
            host, root, termination_log, release = login.run(f"cat /root/userpath/{worker}").split(maxsplit=3)
            lines[worker] = (host, root, release.strip())
            # The kubelet keeps the termination message out of /dev, which the jail shares (security #5).
            assert termination_log == "absent"
            assert kubectl("-n", namespace, "exec", worker, "--", "test", "-f", "/run/termination-log",
                           check=False).returncode == 0
            image_root = kubectl("-n", namespace, "exec", worker, "--", "stat", "-c", "%d:%i", "/").stdout.strip()
            assert host == worker
            assert root == login_root != image_root  # the step's root is the jail, not the worker image's
            assert release.startswith("soperator jail")
        assert (jail / "root" / "userpath" / f"{NAME}-worker-1").exists()  # on the node's volume
        _each_users_sessions_share_one_limited_cgroup(kubectl, namespace, login, service["spec"]["ports"][0]["nodePort"],
                                                      tmp_path)

        # A second node set with its own partition; the first one's pods stay as they are.
        first = _pod_uids(kubectl, namespace)
        partitions = [{"name": "main", "default": True}, {"name": "big", "nodeSets": ["big"]}]
        _set_node_sets(kubectl, namespace, partitions, big=1)
        until(lambda: kubectl("-n", namespace, "get", "statefulset", f"{NAME}-big", check=False).returncode == 0,
              120, "the operator to create the node set's StatefulSet")
        until(lambda: _ready_replicas(kubectl, namespace, f"{NAME}-big") == 1, 300, "big's pod ready")
        until(lambda: "3 idle" in login.run("sinfo -h -p main -o '%D %t'"), 120, "three idle Slurm nodes")
        login.run("sbatch --wait -p big -o /root/userpath/big.out --wrap hostname")
        assert login.run("cat /root/userpath/big.out").strip() == f"{NAME}-big-0"
        assert "big-0" not in login.run("sinfo -h -p main -N -o %N | grep -v big || true")
        # Scaling one node set leaves the other untouched.
        _set_node_sets(kubectl, namespace, partitions, big=2)
        until(lambda: _replicas(kubectl, namespace, f"{NAME}-big") == 2, 120, "the operator to scale the node set")
        until(lambda: _ready_replicas(kubectl, namespace, f"{NAME}-big") == 2, 300, "big's two pods ready")
        until(lambda: "2 idle" in login.run("sinfo -h -p big -o '%D %t'"), 120, "two idle nodes in big")
        login.run("sbatch --wait -p big -N2 -o /root/userpath/scaled.out --wrap 'srun hostname'")
        assert sorted(login.run("cat /root/userpath/scaled.out").split()) == [f"{NAME}-big-0", f"{NAME}-big-1"]
        now = _pod_uids(kubectl, namespace)
        assert {k: now[k] for k in first} == first

        # What Slurm says, in the CR status and the pods' conditions, equals sinfo at the same moment;
        # a drained node shows its reason.
        login.run(f"scontrol update NodeName={NAME}-worker-1 State=DRAIN Reason='userpath maintenance'")
        until(lambda: _slurm_view(kubectl, namespace)[0].get("worker", {}).get("drained") == 1, 120,
              "the operator's status to show the drain")
        sinfo = dict(line.split(maxsplit=1) for line in login.run("sinfo -h -N -o '%N %t'").splitlines())
        counts, conditions = _slurm_view(kubectl, namespace)
        assert counts == {"worker": _tally(sinfo, "worker"), "big": _tally(sinfo, "big")}, (counts, sinfo)
        assert {pod: c["reason"] for pod, c in conditions.items()} == {
            node: SINFO_REASONS[state] for node, state in sinfo.items()}
        assert "userpath maintenance" in conditions[f"{NAME}-worker-1"]["message"]
        assert conditions[f"{NAME}-worker-1"]["status"] == "False" and conditions[f"{NAME}-worker-0"]["status"] == "True"
        login.run(f"scontrol update NodeName={NAME}-worker-1 State=RESUME")
        until(lambda: _slurm_view(kubectl, namespace)[0]["worker"]["idle"] == 2, 120, "the resume in the status")

        # A config change reaches the login node's sackd and every slurmd through the kubelet's
        # ConfigMap refresh and one `scontrol reconfigure`; no pod is replaced.
        pods = _pod_uids(kubectl, namespace)
        kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
            {"spec": {"partitions": [{"name": "main", "default": True, "maxTime": "1:00:00"}, partitions[1]]}}))
        limit = "grep -c MaxTime=1:00:00 /run/slurm/conf/slurm.conf"  # main is the only partition with it
        until(lambda: login.run(f"{limit} || true").strip() == "1", 240, "the login node's new slurm.conf")
        workers = f"sbatch --wait -N4 -o /root/userpath/conf.out --wrap \"srun sh -c '{limit} || true'\""
        until(lambda: login.run(f"{workers} >/dev/null && cat /root/userpath/conf.out").split() == ["1"] * 4,
              240, "every worker's new slurm.conf", interval=5)
        assert _pod_uids(kubectl, namespace) == pods

        _scale_in_and_update_keep_jobs(kubectl, namespace, login)
        _controller_is_not_evictable(api, namespace)
        _controller_restart_keeps_the_running_job(kubectl, namespace, login)
        _scale_to_zero_pends_jobs_until_scaled_up(kubectl, namespace, login)
        _removed_node_set_goes_and_the_rest_stays(kubectl, namespace, login)
        _dead_workers_fail_their_jobs_and_come_back(kubectl, namespace, login, local_cluster.node)
        _accounting_records_jobs(kubectl, namespace, login, local_cluster, tools)
        _container_jobs_on_a_pyxis_node_set(kubectl, namespace, login, jail, tmp_path, local_cluster.node)
        _elastic_node_set_grows_for_a_job_and_shrinks_back(kubectl, namespace, login)
        _cordon_drains_the_workers_and_uncordon_resumes_them(kubectl, api, namespace, login)
    finally:
        login.close()

    _operator_worked_in_cluster(kubectl, namespace, service_account_token)

    # helm uninstall keeps the jail: its claim, its volume and the users' files.
    for release in (NAME, f"{NAME}-storage", "soperator"):
        subprocess.run([str(tools["helm"]), "--kubeconfig", str(local_cluster.plane.kubeconfig), "uninstall",
                        release, "-n", namespace, "--wait", "--timeout", "180s"], check=True, capture_output=True,
                       timeout=240)
    assert json.loads(kubectl("-n", namespace, "get", "pvc", f"{NAME}-jail", "-o", "json").stdout)["status"][
        "phase"] == "Bound"
    assert (jail / "root" / "userpath" / "big.out").read_text().strip() == f"{NAME}-big-0"


# Each ssh user's sessions together (spec.login.sessionLimits): small enough for a hog to meet quickly.
SESSION_LIMITS = {"memory": "256Mi", "cpu": "500m"}
SESSION_USERS = {"lena": 2011, "omar": 2012, "pia": 2013}
# Where cpu and cpuacct share a hierarchy, the runtime links cpu to it.
USERS_CPU_QUOTA = "/sys/fs/cgroup/cpu/users/cpu.cfs_quota_us"


def _each_users_sessions_share_one_limited_cgroup(kubectl, namespace: str, login: Login, port: int,
                                                  workdir) -> None:
    """Users ssh in with their own keys (from their homes in the jail). A login that cannot be
    confined is refused. Every session of a user is in that user's cgroup on the login node (two
    connections, one cgroup), with the spec's limits; a busy loop is throttled there; no session can
    leave it; a memory hog is killed by the kernel in it while the other user's session, with a
    command running, lives on. Root is not limited."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / "users_key")], check=True)
    public = (workdir / "users_key.pub").read_text().strip()
    for user, uid in SESSION_USERS.items():
        # Written as the user: root's session has no CAP_FOWNER for a file of theirs.
        login.run(f"useradd -m -u {uid} -s /bin/bash {user} && runuser -u {user} -- sh -c "
                  f"'umask 077 && mkdir -p ~/.ssh && echo \"{public}\" > ~/.ssh/authorized_keys'")
    key = paramiko.Ed25519Key.from_private_key_file(str(workdir / "users_key"))
    # cgroup v1 refuses a child more CPU quota than its parent: with `users` held to 1 ms, pia's cgroup
    # cannot take the spec's 50 ms, and her login is refused rather than let in unconfined.
    pod = f"{NAME}-login-0"
    kubectl("-n", namespace, "exec", pod, "--", "sh", "-c", f"echo 1000 > {USERS_CPU_QUOTA}")
    try:
        with pytest.raises(paramiko.AuthenticationException):
            connect(NODE_IP, port, "pia", key).close()
    finally:
        kubectl("-n", namespace, "exec", pod, "--", "sh", "-c", f"echo -1 > {USERS_CPU_QUOTA}")

    def said() -> list[str]:
        return [line for line in kubectl("-n", namespace, "logs", pod).stdout.splitlines()
                if any(word in line for word in ("pia", "PAM", "pam", "session-limits"))]
    # The refusal reaches the pod's log through the entrypoint's follower of the helper's file (it
    # polls every 0.2 s): read at once, it can be a moment behind sshd's own line (seen once in CI).
    refused = "session-limits: pia's login refused: cannot confine it"
    until(lambda: any(refused in line for line in said()), 30, f"the pod's log to say {refused!r}")
    lena, lena_again, omar = (connect(NODE_IP, port, user, key) for user in ("lena", "lena", "omar"))
    try:
        running = omar.get_transport().open_session()
        running.exec_command("echo started; sleep 600")
        assert running.makefile().readline().strip() == "started"

        def cgroups(client) -> dict[str, str]:
            code, out, err = run(client, "cat /proc/self/cgroup")
            assert code == 0, err
            return {controller: path for _, controllers, path in (line.split(":", 2) for line in out.splitlines())
                    for controller in controllers.split(",")}
        mine = cgroups(lena)
        for controller in ("memory", "cpu"):
            assert mine[controller].endswith("/users/2011"), mine
        assert cgroups(lena_again) == mine and cgroups(omar)["memory"].endswith("/users/2012")
        assert "/users/" not in login.run("cat /proc/self/cgroup")  # root's session
        limits = run(lena, "cat /sys/fs/cgroup/memory/users/2011/memory.limit_in_bytes "
                           "/sys/fs/cgroup/cpu/users/2011/cpu.cfs_quota_us")
        assert limits[:2] == (0, f"{256 * 2**20}\n50000\n"), limits
        run(lena, "timeout 3 sh -c 'while :; do :; done'")
        throttled = run(lena, "grep nr_throttled /sys/fs/cgroup/cpu/users/2011/cpu.stat")[1].split()
        assert int(throttled[1]) > 0, throttled
        code, _, err = run(lena, "echo $$ > /sys/fs/cgroup/memory/cgroup.procs")
        assert code != 0 and "Read-only file system" in err, err

        code, _, err = run(lena, "head -c 600M /dev/zero | tail")
        assert code == 137, (code, err)  # SIGKILL, from the OOM killer in lena's cgroup
        oom = run(lena, "cat /sys/fs/cgroup/memory/users/2011/memory.oom_control "
                        "/sys/fs/cgroup/memory/users/2011/memory.failcnt")[1]
        assert int(dict(line.split() for line in oom.splitlines()[:-1])["oom_kill"]) >= 1, oom
        assert not running.exit_status_ready()  # omar's command runs on
        assert run(omar, "echo alive")[:2] == (0, "alive\n")
        assert run(lena, "echo still-here")[:2] == (0, "still-here\n")  # only the hog went
    finally:
        for client in (lena, lena_again, omar):
            client.close()


# sinfo's compact states (%t) as the operator names them (pod condition reasons).
SINFO_REASONS = {"idle": "Idle", "alloc": "Allocated", "mix": "Mixed", "drng": "Draining", "drain": "Drained",
                 "down": "Down"}


def _set_node_sets(kubectl, namespace: str, partitions: list[dict] | None, big: int, **more) -> None:
    node_sets = [{"name": "worker", "replicas": 2}, {"name": "big", "replicas": big, "features": ["bigmem"], **more}]
    spec = {"nodeSets": node_sets, **({"partitions": partitions} if partitions else {})}
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps({"spec": spec}))


def _job_state(login: Login, job: str) -> str:
    return login.run(f"scontrol -o show job {job}").split("JobState=")[1].split()[0]


def _evict(api, namespace: str, pod: str) -> None:
    """What `kubectl drain` sends for each pod; raises ApiException (429) where a budget refuses."""
    from kubernetes import client
    client.CoreV1Api(api).create_namespaced_pod_eviction(pod, namespace, client.V1Eviction(
        metadata=client.V1ObjectMeta(name=pod, namespace=namespace)))


def _eviction_refused(api, namespace: str, pod: str) -> None:
    from kubernetes.client.exceptions import ApiException
    with pytest.raises(ApiException) as refused:
        _evict(api, namespace, pod)
    assert refused.value.status == 429 and "disruption budget" in refused.value.body


def _controller_is_not_evictable(api, namespace: str) -> None:
    """An eviction (what a Kubernetes node drain sends) cannot take slurmctld: its PodDisruptionBudget."""
    _eviction_refused(api, namespace, f"{NAME}-controller-0")


def _scale_in_and_update_keep_jobs(kubectl, namespace: str, login: Login) -> None:
    """On real pods: scale `big` 2 -> 1 and change its pod template while jobs run on the nodes
    involved, the operator killed midway through the update; both jobs end COMPLETED 0:0, each pod
    goes only after its job."""
    def state(job: str) -> str:
        return _job_state(login, job)

    leaving = f"{NAME}-big-1"
    job = login.run(f"sbatch --parsable -w {leaving} -o /root/userpath/in.out --wrap 'sleep 40; echo done'").strip()
    until(lambda: state(job) == "RUNNING", 60, "the job on the leaving node to run")
    _set_node_sets(kubectl, namespace, None, big=1)
    until(lambda: "drng" in login.run(f"sinfo -h -n {leaving} -o %t"), 60, "the operator to drain the node")
    assert _replicas(kubectl, namespace, f"{NAME}-big") == 2 and state(job) == "RUNNING"
    until(lambda: _replicas(kubectl, namespace, f"{NAME}-big") == 1, 180, "the scale-in once the job ended")
    assert login.run(f"scontrol -o show job {job}").count("ExitCode=0:0") == 1 and state(job) == "COMPLETED"
    assert login.run("cat /root/userpath/in.out").strip() == "done"
    until(lambda: leaving not in login.run("sinfo -h -N -o %N"), 120, "the leaving node's record to go")

    staying = f"{NAME}-big-0"
    uid = _pod_uids(kubectl, namespace)[staying]
    job = login.run(f"sbatch --parsable -w {staying} -o /root/userpath/up.out --wrap 'sleep 40; echo done'").strip()
    until(lambda: state(job) == "RUNNING", 60, "the job on the updated node set to run")
    _set_node_sets(kubectl, namespace, None, big=1, sharedMemorySize="128Mi")  # a new pod template
    until(lambda: "drng" in login.run(f"sinfo -h -n {staying} -o %t"), 60, "the operator to drain for the update")
    assert _pod_uids(kubectl, namespace).get(staying) == uid and state(job) == "RUNNING"
    # The operator killed mid-update (no grace): its successor resumes from what it reads.
    operator = _operator_pods(kubectl, namespace)
    kubectl("-n", namespace, "delete", "pod", *operator, "--grace-period=0", "--force")
    until(lambda: _pod_uids(kubectl, namespace).get(staying) not in (None, uid), 240, "the pod replaced after the job")
    assert not set(operator) & set(_operator_pods(kubectl, namespace))
    assert login.run(f"scontrol -o show job {job}").count("ExitCode=0:0") == 1 and state(job) == "COMPLETED"
    until(lambda: login.run(f"sinfo -h -n {staying} -o %t").strip() == "idle", 180, "the new pod's node in service")


def _controller_restart_keeps_the_running_job(kubectl, namespace: str, login: Login) -> None:
    """slurmctld's pod deleted (what an image change or a node loss does) under a running job: the
    new pod starts from the state on its volume, and the job is neither restarted nor killed."""
    controller = f"{NAME}-controller-0"
    job = login.run(f"sbatch --parsable -w {NAME}-worker-0 -o /root/userpath/ctl.out --wrap 'sleep 45; echo done'")
    job = job.strip()
    until(lambda: _job_state(login, job) == "RUNNING", 60, "the job to run")
    start = login.run(f"scontrol -o show job {job}").split("StartTime=")[1].split()[0]
    _replace_pod(kubectl, namespace, controller)

    def shown() -> str:
        code, out, _ = run(login.client, f"scontrol -o show job {job}", 30)
        return out if code == 0 else ""
    until(shown, 240, "the new slurmctld to answer", interval=2)
    assert f"StartTime={start} " in shown() and "Restarts=0" in shown(), shown()
    until(lambda: "JobState=COMPLETED" in shown(), 120, "the job to complete")
    assert "ExitCode=0:0" in shown() and login.run("cat /root/userpath/ctl.out").strip() == "done"


def _scale_to_zero_pends_jobs_until_scaled_up(kubectl, namespace: str, login: Login) -> None:
    """`replicas: 0`: the partition stays, a job for it pends with a reason, scaling up runs it."""
    _set_node_sets(kubectl, namespace, None, big=0, sharedMemorySize="128Mi")
    until(lambda: _replicas(kubectl, namespace, f"{NAME}-big") == 0, 120, "big scaled to zero")
    until(lambda: f"{NAME}-big" not in login.run("sinfo -h -N -o %N"), 120, "big's node record gone")
    job = login.run("sbatch --parsable -p big -o /root/userpath/zero.out --wrap hostname").strip()
    # Its reason comes with the scheduler's next pass over the queue: up to sched_interval (60 s) away.
    until(lambda: waits_for_nodes(login.run(f"scontrol -o show job {job}")), 150, "the job to pend for nodes")
    _set_node_sets(kubectl, namespace, None, big=1, sharedMemorySize="128Mi")
    until(lambda: _job_state(login, job) == "COMPLETED", 300, "the job to run once big is back")
    assert login.run("cat /root/userpath/zero.out").strip() == f"{NAME}-big-0"


def _removed_node_set_goes_and_the_rest_stays(kubectl, namespace: str, login: Login) -> None:
    """`big` taken out of the spec: drained, its StatefulSet lowered to zero and deleted (by the
    operator's own ServiceAccount); the first node set's pods untouched."""
    pods = {k: v for k, v in _pod_uids(kubectl, namespace).items() if f"{NAME}-big-" not in k}
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
        {"spec": {"nodeSets": [{"name": "worker", "replicas": 2}], "partitions": [{"name": "main", "default": True}]}}))
    until(lambda: kubectl("-n", namespace, "get", "statefulset", f"{NAME}-big", check=False).returncode != 0, 180,
          "the removed node set's StatefulSet to be deleted")
    until(lambda: f"{NAME}-big" not in login.run("sinfo -h -N -o %N"), 120, "its node records gone")
    assert _pod_uids(kubectl, namespace) == pods


def _dead_workers_fail_their_jobs_and_come_back(kubectl, namespace: str, login: Login, node) -> None:
    """Worker containers that die under running jobs, on the real kubelet: slurmd killed (the kubelet
    restarts the container), the container's main process killed through containerd, then both pods
    deleted by force (their StatefulSet makes new ones). Each dead node's requeueable batch job (its
    srun step running) is requeued (its second run is the worker death e2e's); the interactive srun job ends NODE_FAIL
    and srun exits non-zero; no job stays RUNNING; the nodes come back idle. (One CPU a worker here:
    one job a node at a time.)"""
    w0, w1 = f"{NAME}-worker-0", f"{NAME}-worker-1"

    def batch_on(worker: str, tag: str) -> str:
        job = login.run(f"sbatch --parsable --requeue -w {worker} --open-mode=append -o /root/userpath/{tag}.out "
                        "--wrap 'echo start-${SLURM_RESTART_COUNT:-0}; srun sleep $((SLURM_RESTART_COUNT ? 1 : 600)); "
                        "echo done'").strip()
        until(lambda: f"{job}.0" in login.run(f"squeue -h -s -j {job} -o %i").split(), 60, f"{tag}'s srun step")
        return job

    def requeued(tag: str, job: str) -> None:
        until(lambda: "Restarts=1" in login.run(f"scontrol -o show job {job}"), 120, f"{tag}'s batch job requeued")

    def container(pod: str) -> str:
        body = json.loads(kubectl("-n", namespace, "get", "pod", pod, "-o", "json").stdout)
        return body["status"]["containerStatuses"][0]["containerID"]

    def idle() -> None:
        until(lambda: login.run(f"sinfo -h -n {w0},{w1} -o %t").split() == ["idle"], 180, "both nodes idle again")

    batches = {"slurmd": batch_on(w0, "slurmd"), "main": batch_on(w1, "main")}
    kubectl("-n", namespace, "exec", w0, "--", "sh", "-c", "kill -9 $(cat /run/slurmd.pid)")
    node.kill_container(container(w1))
    for tag, job in batches.items():
        requeued(tag, job)
    idle()

    batches["replaced"] = batch_on(w0, "replaced")
    login.run(f"setsid sh -c 'srun -J interactive -w {w1} sleep 600 >/dev/null 2>&1; "
              "echo $? > /root/userpath/interactive.rc' </dev/null >/dev/null 2>&1 &")
    interactive = until(lambda: login.run("squeue -h -n interactive -t R -o %i").strip(), 60, "the srun job to run")
    uids = _pod_uids(kubectl, namespace)
    kubectl("-n", namespace, "delete", "pod", w0, w1, "--grace-period=0", "--force")
    requeued("replaced", batches["replaced"])
    until(lambda: _job_state(login, interactive) == "NODE_FAIL", 120, "the srun job to end as a node failure")
    rc = until(lambda: login.run("cat /root/userpath/interactive.rc 2>/dev/null || true").strip(), 60, "srun to exit")
    assert rc != "0"
    until(lambda: all(_pod_uids(kubectl, namespace).get(w) not in (None, uids[w]) for w in (w0, w1)), 180,
          "both new pods running")
    # Each first run ended with its node: nothing after its first line but, for the pod deleted within
    # its grace period, the node failure its successor reported. A requeued job waits out its launch
    # credential (2 minutes) before it runs again; that second run is the worker death e2e's
    # (tests/e2e/test_worker_death_e2e.py): here the requeued jobs are cancelled, run again or not.
    for tag, job in batches.items():
        first, _ = _runs(login.run(f"cat /root/userpath/{tag}.out"))
        if tag == "replaced" and first[1:]:
            assert first[0] == "start-0" and "node failure" in "\n".join(first[1:]).lower(), first
        else:
            assert first == ["start-0"], (tag, first)
    login.run(f"scancel {' '.join(batches.values())}")
    until(lambda: login.run("squeue -h -t R,CG -o '%i %N'").strip() == "", 60, "no job left running")
    idle()


def _runs(output: str) -> tuple[list[str], list[str]]:
    """A requeued job's output file (append mode) split into its first and second runs' lines."""
    lines = output.strip().splitlines()
    second = lines.index("start-1") if "start-1" in lines else len(lines)
    return lines[:second], lines[second:]


def _accounting_records_jobs(kubectl, namespace: str, login: Login, local_cluster, tools) -> None:
    """Accounting switched on: the storage chart gives the database its kept volume, the CR turns it on;
    the operator starts MariaDB and slurmdbd, slurmctld takes the new slurm.conf, and a job is in
    sacct, COMPLETED 0:0, read from the login node; a new jail user is accounted with no sacctmgr; the
    controller's pod replaced, slurmctld starts again and accounts jobs."""
    volume = local_cluster.volumes / f"{namespace}-{NAME}-accounting-db"
    subprocess.run([str(tools["helm"]), "--kubeconfig", str(local_cluster.plane.kubeconfig), "upgrade",
                    f"{NAME}-storage", str(ROOT / "charts" / "slurm-cluster-storage"), "-n", namespace,
                    "--reuse-values", "--set", "accountingDatabase.enabled=true", "--set",
                    "accountingDatabase.persistentVolume.enabled=true", "--set",
                    f"accountingDatabase.persistentVolume.hostPath={volume}"], check=True, capture_output=True,
                   timeout=120)
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
        {"spec": {"accounting": {"enabled": True, "managed": {"claimName": f"{NAME}-accounting-db"}}}}))

    def condition() -> dict:
        body = json.loads(kubectl("-n", namespace, "get", "slurmcluster", NAME, "-o", "json").stdout)
        return next((c for c in body["status"]["conditions"] if c["type"] == "AccountingReady"), {})
    until(lambda: condition().get("status") == "True", 300, "AccountingReady", interval=2)
    until(lambda: "accounting_storage/slurmdbd" in login.run("scontrol show config | grep AccountingStorageType"),
          180, "slurmctld to take accounting on", interval=2)
    job = login.run("sbatch --parsable --wait -o /dev/null --wrap true").strip()
    until(lambda: login.run(f"sacct -a -n -X -P -j {job} -o State,ExitCode || true").strip() == "COMPLETED|0:0",
          120, "the job's record in sacct", interval=2)
    assert (volume / "slurm_acct_db").is_dir()  # the database lives on the kept volume
    # A user added in the jail is put in the default account by the controller (no sacctmgr by hand),
    # and their first job is recorded under it.
    login.run("useradd -m -u 2001 -s /bin/bash alice")
    until(lambda: login.run("sacctmgr -n -P list associations user=alice format=account").strip() == "users",
          120, "alice's association", interval=2)
    job = login.run("runuser -u alice -- sbatch --parsable --wait -o /dev/null --wrap true").strip()
    until(lambda: login.run(f"sacct -a -n -X -P -j {job} -o Account,User,State || true").strip()
          == "users|alice|COMPLETED", 120, "alice's job under the default account", interval=2)
    # slurmctld's pod replaced now that it is accounted: its kept ClusterID predates slurmdbd's record
    # of the cluster (found here: "CLUSTER ID MISMATCH", a crash loop); it starts and accounts jobs.
    _replace_pod(kubectl, namespace, f"{NAME}-controller-0")
    until(lambda: run(login.client, "scontrol ping", 30)[0] == 0, 240, "the new slurmctld to answer", interval=2)
    job = login.run("sbatch --parsable --wait -o /dev/null --wrap true").strip()
    until(lambda: login.run(f"sacct -a -n -X -P -j {job} -o State,ExitCode || true").strip() == "COMPLETED|0:0",
          120, "a job's record after the controller's restart", interval=2)


def _container_jobs_on_a_pyxis_node_set(kubectl, namespace: str, login: Login, jail, workdir, node) -> None:
    """A node set with Pyxis added to the running cluster: on the real kubelet and containerd, alice's
    container job runs the image she keeps in the jail (a Debian 12 .sqsh made with `enroot import
    podman://`), and its output lands in the jail. Its worker runs under soperator's seccomp profile,
    which the operator chart's DaemonSet installed on the node; the node set removed again leaves the
    first one's pods as they were."""
    installed = node.workdir / "kubelet" / "seccomp" / pyxis_worker_profile_path()
    assert installed.read_text() == profile_json()
    image = jail / "home" / "alice" / "bookworm.sqsh"
    import_podman_image(bookworm_image(workdir), image, workdir)
    shutil.chown(image, 2001, 2001)
    pods = _pod_uids(kubectl, namespace)
    main = {"name": "main", "default": True}
    box = {"name": "box", "replicas": 1, "pyxis": {"enabled": True, "storageSize": "2Gi"}}
    # Images mounted, not unpacked: the worker asks for /dev/fuse, which the operator chart's device
    # plugin (a DaemonSet, like the profile's) offers on the node.
    offered = json.loads(kubectl("get", "node", NODE_NAME, "-o", "json").stdout)["status"]["allocatable"]
    assert offered.get(FUSE_RESOURCE) == "64", offered
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
        {"spec": {"nodeSets": [{"name": "worker", "replicas": 2}, box], "partitions": [main],
                  "plugStack": {"pyxis": {"mountImages": True}}}}))
    until(lambda: kubectl("-n", namespace, "get", "statefulset", f"{NAME}-box", check=False).returncode == 0,
          120, "the operator to create the Pyxis node set's StatefulSet")
    until(lambda: _ready_replicas(kubectl, namespace, f"{NAME}-box") == 1, 300, "the Pyxis worker ready")
    until(lambda: "idle" in login.run(f"sinfo -h -n {NAME}-box-0 -o %t"), 120, "the Pyxis worker idle in Slurm")
    # From alice's home: a step starts in the caller's directory, and root's is closed to her.
    as_alice = "cd /home/alice && runuser -u alice --"
    shown = login.run(f"{as_alice} srun -w {NAME}-box-0 --container-image=/home/alice/bookworm.sqsh "
                      "sh -c 'grep ^VERSION_ID= /etc/os-release; stat -f -c %T /'")
    assert shown.split() == ['VERSION_ID="12"', "overlayfs"]  # the image's (the jail is Debian 13), mounted
    login.run(f"{as_alice} sbatch --wait -w {NAME}-box-0 --container-image=/home/alice/bookworm.sqsh "
              "-o /home/alice/container.out --wrap 'grep ^VERSION_ID= /etc/os-release'")
    assert (jail / "home" / "alice" / "container.out").read_text() == 'VERSION_ID="12"\n'  # in the jail
    # A seccomp filter on both: soperator's profile on the Pyxis worker, the runtime's default on the others.
    seccomp = {pod: kubectl("-n", namespace, "exec", pod, "--", "grep", "^Seccomp:", "/proc/1/status").stdout.split()[1]
               for pod in (f"{NAME}-box-0", f"{NAME}-worker-0")}
    assert seccomp == {f"{NAME}-box-0": "2", f"{NAME}-worker-0": "2"}
    box = json.loads(kubectl("-n", namespace, "get", "pod", f"{NAME}-box-0", "-o", "json").stdout)
    assert box["spec"]["containers"][0]["securityContext"]["seccompProfile"] == {
        "type": "Localhost", "localhostProfile": pyxis_worker_profile_path()}
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
        {"spec": {"nodeSets": [{"name": "worker", "replicas": 2}], "partitions": [main]}}))
    until(lambda: kubectl("-n", namespace, "get", "statefulset", f"{NAME}-box", check=False).returncode != 0, 180,
          "the Pyxis node set's StatefulSet to be deleted")
    assert {k: v for k, v in _pod_uids(kubectl, namespace).items() if "-box-" not in k} == pods


def _elastic_node_set_grows_for_a_job_and_shrinks_back(kubectl, namespace: str, login: Login) -> None:
    """An autoscaling node set on the real kubelet: from zero, a job for its partition makes Slurm
    power a record up, the operator starts its pod, and the job runs there with no change to the CR;
    idle for its idle time, the worker is released and its record powered down again. A worker whose
    pod cannot be scheduled is given up after its node set's resumeTimeout, with the scheduler's words."""
    main = {"name": "main", "default": True}
    elastic = {"name": "elastic", "autoscale": {"max": 1, "idleSeconds": 10}}
    stranded = {"name": "stranded", "autoscale": {"max": 1, "resumeTimeout": 10},
                "scheduling": {"nodeSelector": {"soperator.test/nowhere": "true"}}}
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
        {"spec": {"nodeSets": [{"name": "worker", "replicas": 2}, elastic, stranded],
                  "partitions": [main, {"name": "elastic", "nodeSets": ["elastic"]},
                                 {"name": "stranded", "nodeSets": ["stranded"]}]}}))
    node = f"{NAME}-elastic-0"
    # One line: the node is in main too (main spans every node set).
    state = f"sinfo -h -N -p elastic -n {node} -o %t"
    until(lambda: login.run(f"{state} || true").strip() == "idle~", 180, "the elastic node set's powered-down record")
    assert _replicas(kubectl, namespace, f"{NAME}-elastic") == 0
    generation = json.loads(kubectl("-n", namespace, "get", "slurmcluster", NAME, "-o", "json").stdout)["metadata"][
        "generation"]
    job = login.run("sbatch --parsable -p elastic -o /root/userpath/elastic.out --wrap hostname").strip()
    until(lambda: _job_state(login, job) == "COMPLETED", 300, "the job to run on a worker started for it")
    assert login.run("cat /root/userpath/elastic.out").strip() == node
    body = json.loads(kubectl("-n", namespace, "get", "slurmcluster", NAME, "-o", "json").stdout)
    assert body["metadata"]["generation"] == generation  # nobody touched the CR
    until(lambda: _replicas(kubectl, namespace, f"{NAME}-elastic") == 0, 180, "the idle worker released")
    until(lambda: login.run(state).strip() == "idle~", 120, "its record powered down")

    lost = f"{NAME}-stranded-0"
    job = login.run("sbatch --parsable -p stranded -o /dev/null --wrap true").strip()
    why = f"sinfo -h -N -p stranded -n {lost} -o %E"
    until(lambda: login.run(why).startswith(f"{START_FAILED} in 10s: "), 180, "the operator to give the worker up")
    assert "didn't match Pod's node affinity/selector" in login.run(why)
    fields = login.run(f"scontrol -o show job {job}")
    assert "JobState=PENDING" in fields and int(fields.split("Restarts=")[1].split()[0]) >= 1, fields  # requeued
    login.run(f"scancel {job}")
    until(lambda: login.run(f"sinfo -h -N -p stranded -n {lost} -o %t").strip() == "idle~", 120,
          "the given-up record powered down, idle")
    assert _replicas(kubectl, namespace, f"{NAME}-stranded") == 0
    kubectl("-n", namespace, "patch", "slurmcluster", NAME, "--type=merge", "-p", json.dumps(
        {"spec": {"nodeSets": [{"name": "worker", "replicas": 2}], "partitions": [main]}}))
    for gone in ("elastic", "stranded"):
        until(lambda: kubectl("-n", namespace, "get", "statefulset", f"{NAME}-{gone}", check=False).returncode != 0,
              180, f"the {gone} node set's StatefulSet to be deleted")


def _cordon_drains_the_workers_and_uncordon_resumes_them(kubectl, api, namespace: str, login: Login) -> None:
    """`kubectl drain`, step by step: its cordon drains the Slurm nodes of the workers on the node, with
    the operator's reason (an admin's own drain stays); its eviction of a worker is refused while the
    worker's job runs and accepted once the job ended and Slurm says drained. Uncordon undoes only the
    operator's drains, and the evicted worker comes back and serves."""
    worker = f"{NAME}-worker-0"
    host = json.loads(kubectl("-n", namespace, "get", "pod", worker, "-o", "json").stdout)["spec"]["nodeName"]
    job = login.run(f"sbatch --parsable -w {worker} -o /dev/null --wrap 'sleep 40'").strip()
    until(lambda: _job_state(login, job) == "RUNNING", 60, "the job on the worker to run")
    login.run(f"scontrol update NodeName={NAME}-worker-1 State=DRAIN Reason='userpath: admin'")

    def reasons() -> dict[str, str]:
        return dict(line.split(" ", 1) for line in login.run("sinfo -h -N -p main -o '%N %E'").splitlines())

    def evictable(pod: str) -> bool:
        labels = json.loads(kubectl("-n", namespace, "get", "pod", pod, "-o", "json").stdout)["metadata"]["labels"]
        return labels.get(EVICTABLE_LABEL) == "true"
    kubectl("cordon", host)
    try:
        until(lambda: reasons().get(worker) == f"{KUBE_NODE} {host} cordoned", 60,
              "the operator to drain the cordoned node's workers")
        assert reasons()[f"{NAME}-worker-1"] == "userpath: admin"
        assert _job_state(login, job) == "RUNNING"
        _eviction_refused(api, namespace, worker)
        until(lambda: _job_state(login, job) == "COMPLETED", 120, "the job to end")
        until(lambda: evictable(worker), 60, "the operator to label the drained worker evictable")
        assert evictable(f"{NAME}-worker-1")  # drained by its admin: no job can start there either
        def uid() -> str:
            return kubectl("-n", namespace, "get", "pod", worker, "-o", "jsonpath={.metadata.uid}", check=False).stdout
        evicted = uid()
        _evict(api, namespace, worker)
        until(lambda: uid() not in ("", evicted), 120, "the StatefulSet's new pod for the evicted worker")
    finally:
        kubectl("uncordon", host)
    until(lambda: login.run(f"sinfo -h -n {worker} -o %t").strip() == "idle", 240,
          "the new pod's node in service after uncordon")
    assert not evictable(worker)
    assert reasons()[f"{NAME}-worker-1"] == "userpath: admin"
    login.run(f"scontrol update NodeName={NAME}-worker-1 State=RESUME")
    login.run(f"sbatch --wait -w {worker} -o /dev/null --wrap true")


def _operator_pods(kubectl, namespace: str) -> list[str]:
    return kubectl("-n", namespace, "get", "pods", "-l", "app.kubernetes.io/name=slurm-operator",
                   "-o", "jsonpath={.items[*].metadata.name}").stdout.split()


def _replicas(kubectl, namespace: str, name: str) -> int:
    sts = json.loads(kubectl("-n", namespace, "get", "statefulset", name, "-o", "json").stdout)
    return sts["spec"]["replicas"]


def _ready_replicas(kubectl, namespace: str, name: str) -> int:
    """Not `kubectl rollout status`: worker StatefulSets are OnDelete, which it does not follow."""
    sts = json.loads(kubectl("-n", namespace, "get", "statefulset", name, "-o", "json").stdout)
    return (sts.get("status") or {}).get("readyReplicas") or 0


def _tally(sinfo: dict[str, str], node_set: str) -> dict[str, int]:
    """sinfo's states of one node set's nodes, counted under the status' names."""
    names = {"Idle": "idle", "Allocated": "allocated", "Mixed": "mixed", "Draining": "draining", "Drained": "drained",
             "Down": "down"}
    counts = dict.fromkeys(["idle", "allocated", "mixed", "draining", "drained", "down", "notRegistered", "unknown"], 0)
    for node, state in sinfo.items():
        if node.startswith(f"{NAME}-{node_set}-"):
            counts[names[SINFO_REASONS[state]]] += 1
    return counts


def _slurm_view(kubectl, namespace: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """(Slurm counts per node set from the CR status, the SlurmNode condition per worker pod)."""
    status = json.loads(kubectl("-n", namespace, "get", "slurmcluster", NAME, "-o", "json").stdout).get("status", {})
    counts = {n["name"]: n["slurm"] for n in status.get("nodeSets", []) if "slurm" in n}
    pods = json.loads(kubectl("-n", namespace, "get", "pods", "-l", "app.kubernetes.io/component=worker",
                              "-o", "json").stdout)["items"]
    conditions = {p["metadata"]["name"]: c for p in pods for c in p["status"].get("conditions", [])
                  if c["type"] == "SlurmNode"}
    return counts, conditions


def _replace_pod(kubectl, namespace: str, pod: str) -> None:
    """Delete the pod and wait for its StatefulSet's new one to run."""
    uid = _pod_uids(kubectl, namespace)[pod]
    kubectl("-n", namespace, "delete", "pod", pod, "--wait=false")
    until(lambda: _pod_uids(kubectl, namespace).get(pod) not in (None, uid), 120, f"the new {pod}")


def _pod_uids(kubectl, namespace: str) -> dict[str, str]:
    pods = json.loads(kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods if p["status"].get("phase") == "Running"}


def _operator_worked_in_cluster(kubectl, namespace: str, service_account_token) -> None:
    """The chart's operator did everything as its own ServiceAccount, and serves authenticated metrics
    through its Service."""
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert any(e["involvedObject"]["name"] == NAME and e["reason"] == "AllReady" for e in events)
    service = json.loads(kubectl("-n", namespace, "get", "service", "soperator-slurm-operator-metrics",
                                 "-o", "json").stdout)
    address, port = service["spec"]["clusterIP"], service["spec"]["ports"][0]["port"]
    reader = f"soperator-slurm-operator-{namespace}-metrics-reader"
    status, metrics = scrape(port, service_account_token(namespace, "prometheus", reader), host=address)
    assert status == 200 and f'soperator_reconcile_total{{cluster="{NAME}",namespace="{namespace}"}}' in metrics, status
    # Its passes read pods and nodes from its watched lists (the chart lets it watch both).
    watched = dict(re.findall(r'soperator_kube_watched_reads_total\{kind="(\w+)"\} ([0-9.e+]+)', metrics))
    assert float(watched.get("Pod", 0)) > 0 and float(watched.get("Node", 0)) > 0, watched
    # Slurm's state, read by the in-cluster operator through slurmrestd (by node set) and from
    # slurmctld's own metrics on its port (Slurm's series): the two idle workers left.
    who = f'cluster="{NAME}",namespace="{namespace}"'
    assert f"slurm_up{{{who}}} 1.0" in metrics
    assert f'soperator_node_set_nodes{{{who},node_set="worker",state="idle"}} 2.0' in metrics, metrics
    assert f"slurm_nodes_idle{{{who}}} 2.0" in metrics, metrics
    assert scrape(port, service_account_token(namespace, "nobody"), host=address)[0] == 403
    logs = kubectl("-n", namespace, "logs", "deployment/soperator-slurm-operator").stdout
    for bad in (" ERROR ", "Traceback", "Forbidden"):
        assert bad not in logs, logs[max(0, logs.find(bad) - 300):][:4000]
