"""End to end in real containers built from our images, configured only by `soperator render`:
populate-jail fills the jail, controller + two workers + one login node start from the rendered pod
specs, and a user sshes in (paramiko), writes a file and runs a two-node batch job that sees it.

The user's path itself runs on a real Kubernetes node (tests/kube/test_user_path.py). This file
keeps what that test does not cover, and what needs direct control of the containers: a non-root
user's session and jobs (escape checks, process limit, password refused), a second populate run and
an unpopulated jail, the overwrite that holds the nodes around a running job, a config change under a
running job with no container replaced, scale 2 -> 3 -> 1 with records deleted, a worker killed
with SIGKILL coming back under its name, scale to zero with a job pending until a worker is back, and
the controller replaced under a running job."""
from __future__ import annotations

import os
import re
import shutil
import time

import paramiko
import pytest

from images.podman import podman
from soperator.render.configs import slurm_files
from tests.cluster.controlplane import free_port
from tests.support.e2e_cluster import MAX_USER_PROCESSES, SSH_PORT, add_user, e2e_cluster, running, ssh, try_ssh
from tests.support.job_reason import waits_for_nodes
from tests.support.ssh_session import run as _run
from tests.support.wait import until as _wait

pytestmark = pytest.mark.e2e
# Root in the jail switches to munged's user and looks into its /proc/<pid>/root: the node container's
# root, with the munge key, unless munged is not dumpable (its binary unreadable to its user). Its ids
# from its status: a non-dumpable process's /proc directory is root's.
INTO_MUNGED = ("M=$(pgrep -xo munged); setpriv --reuid=$(awk '/^Uid:/ {print $2}' /proc/$M/status) "
               "--regid=$(awk '/^Gid:/ {print $2}' /proc/$M/status) --clear-groups "
               "sh -c \"id -u; ls /proc/$M/root/ 2>&1\" | tr '\\n' ' ' | sed 's/^/munged-root: /'; echo")
# Root may log in with this key (spec.login.rootSshPublicKeys) on this file's clusters.
ROOT_KEY = paramiko.RSAKey.generate(2048)


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path, login={"rootSshPublicKeys": [f"{ROOT_KEY.get_name()} {ROOT_KEY.get_base64()}"]})


def test_ssh_to_login_and_sbatch_a_two_node_job_in_the_jail(cluster, tmp_path):
    first = cluster.populate("first")
    assert first["action"] == "populated"
    assert (cluster.jail / ".soperator" / "populated").exists()
    user_key = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") else None
    if user_key is None:
        user_key = paramiko.RSAKey.generate(2048)
    add_user(cluster.jail, "alice", 1000, f"{user_key.get_name()} {user_key.get_base64()}")
    # A setuid-root binary on the shared volume, as a jail root could plant one: it must not make
    # alice root, in a login session or in a job step.
    shutil.copy(cluster.jail / "usr" / "bin" / "id", cluster.jail / "opt" / "suid-id")
    os.chmod(cluster.jail / "opt" / "suid-id", 0o4755)

    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    for i in range(2):
        cluster.start(f"e2e-worker-{i}", cluster.pod("StatefulSet", "e2e-worker"))
    port = free_port()
    cluster.start("e2e-login-0", cluster.pod("StatefulSet", "e2e-login"), ["-p", f"127.0.0.1:{port}:{SSH_PORT}"])

    def both_idle():
        out = podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t %D", check=False).stdout.split()
        return out == ["idle", "2"]

    _wait(both_idle, 120, "both workers to register")
    client = _wait(lambda: try_ssh(port, "alice", user_key), 60, "sshd on the login node")
    with client:
        code, out, err = _run(client, "echo written-on-login > ~/note.txt && cat /etc/soperator-jail-release")
        assert code == 0 and out.startswith("soperator jail"), err
        assert _run(client, "/opt/suid-id -u")[1].strip() == "1000"
        # hidepid: alice sees her own processes only (sshd and root's daemons are there, unseen).
        assert _run(client, "ps -eo user= | sort -u")[1].split() == ["alice"]
        # The session, like a job step, gains nothing by exec and creates no user namespace.
        assert _run(client, "grep NoNewPrivs /proc/self/status; unshare --user true 2>/dev/null && echo userns-created "
                            "|| echo userns-refused")[1].split() == ["NoNewPrivs:", "1", "userns-refused"]
        # The session's own procfs keeps the runtime's masks: /proc/sys read-only (kernel.core_pattern).
        proc_sys = _run(client, "grep ' /proc/sys ' /proc/self/mountinfo")[1].split()
        assert proc_sys and proc_sys[5].split(",")[0] == "ro", proc_sys
        # The session has the job steps' bounding set: no CAP_SYS_ADMIN, no CAP_SYS_CHROOT.
        bounding = int(_run(client, "grep CapBnd /proc/self/status")[1].split()[1], 16)
        assert not bounding >> 21 & 1 and not bounding >> 18 & 1, hex(bounding)
        # A fork bomb stops at the spec's per-user process limit (the kernel counts alice's processes).
        assert _run(client, "ulimit -u")[1].strip() == str(MAX_USER_PROCESSES)
        code, out, err = _run(client, f"sh -c 'for i in $(seq {MAX_USER_PROCESSES + 20}); do sleep 5 & done' 2>&1; "
                                      "pkill -u alice sleep; true")
        assert "Cannot fork" in out or "Resource temporarily unavailable" in out, (out, err)
        script = ("#!/bin/bash\n#SBATCH -N 2\n#SBATCH -o /home/alice/job-%j.out\n"
                  "srun bash -c 'echo $(hostname) $(cat /etc/soperator-jail-release | cut -d\" \" -f2) "
                  "$(cat ~/note.txt); echo from-$(hostname) > ~/from-$(hostname)'\n"
                  "srun -N1 stat -c 'shm-mode %a' /dev/shm\n"
                  "srun -N1 sh -c 'echo suid-id-gives-$(/opt/suid-id -u)'\n"
                  "srun -N1 sh -c 'echo ps-users-$(ps -eo user= | sort -u | tr \"\\n\" +)'\n"
                  "srun -N1 sh -c 'touch /sys/kernel/x 2>/dev/null && echo sys-writable || echo sys-read-only; "
                  "ls /dev | grep -cE \"^(sd|vd|nvme|xvd|loop|dm-)\" | sed s/^/block-devices-/'\n")
        code, out, err = _run(client, f"cat > job.sh <<'EOF'\n{script}EOF\nsbatch --parsable job.sh")
        assert code == 0, err
        job = out.strip()

        def finished():
            _, state, _ = _run(client, f"scontrol -o show job {job} | grep -o 'JobState=[A-Z]*'")
            return state.strip() if state.strip() not in ("", "JobState=PENDING", "JobState=RUNNING",
                                                          "JobState=CONFIGURING", "JobState=COMPLETING") else None

        assert _wait(finished, 120, f"job {job}") == "JobState=COMPLETED"
        code, out, _ = _run(client, f"cat ~/job-{job}.out; cat ~/from-e2e-worker-0 ~/from-e2e-worker-1")
        lines = sorted(out.split("\n"))
        assert "e2e-worker-0 jail written-on-login" in lines and "e2e-worker-1 jail written-on-login" in lines
        assert "from-e2e-worker-0" in lines and "from-e2e-worker-1" in lines
        assert "shm-mode 1777" in lines  # sticky: users cannot delete each other's segments
        assert "suid-id-gives-1000" in lines
        assert "ps-users-alice+" in lines  # hidepid in the job step's /proc too
        # Not privileged: no node block device in the jail's /dev, and /sys is read-only.
        assert "sys-read-only" in lines and "block-devices-0" in lines
        # Cancelling a running job ends its processes (slurmstepd, root, signals alice's tasks) and
        # frees the node: an ordinary operation that needs CAP_KILL.
        _, out, err = _run(client, "sbatch --parsable -N1 -w e2e-worker-0 --wrap 'sleep 600'")
        sleeper = out.strip()
        _wait(lambda: "JobState=RUNNING" in _run(client, f"scontrol -o show job {sleeper}")[1], 60, "sleep job to run")
        assert _run(client, f"scancel {sleeper}")[0] == 0
        _wait(lambda: _run(client, "sinfo -h -n e2e-worker-0 -o %t")[1].strip() == "idle", 60, "worker-0 idle again")
        assert "JobState=CANCELLED" in _run(client, f"scontrol -o show job {sleeper}")[1]
        assert "sleep 600" not in cluster.exec("e2e-worker-0", "ps", "-eo", "args")

    # Root's session (spec.login.rootSshPublicKeys) is in the jail as root's job step is: it cannot
    # chroot, mount or set kernel knobs, and no process it can see leads to the login container's root
    # (with sshd's plain chroot, /proc/<sshd>/root did, and `chroot` + `..` out of it).
    with ssh(port, "root", ROOT_KEY) as root:
        code, out, err = _run(root, "cat /etc/soperator-jail-release; grep CapBnd /proc/self/status; "
                                    "chroot / true 2>&1; mount -t tmpfs none /mnt 2>&1; "
                                    "(: >> /proc/sys/kernel/core_pattern) 2>&1; "
                                    "ls -d /proc/[0-9]*/root/opt/soperator/soperator_node 2>/dev/null | wc -l; "
                                    f"{INTO_MUNGED}; "
                                    "test -e /opt/soperator/soperator_node && echo node-root || echo jail-root")
        lines = out.splitlines()
        assert lines[0].startswith("soperator jail") and lines[-1] == "jail-root", out
        bounding = int(lines[1].split()[1], 16)
        assert not bounding >> 21 & 1 and not bounding >> 18 & 1, out
        assert "Operation not permitted" in lines[2] and "Read-only file system" in out, out
        assert lines[-3] == "0", out  # no /proc/<pid>/root of the login container's processes
        assert re.fullmatch(r"munged-root: [1-9][0-9]* ls: cannot access '/proc/[0-9]+/root/': .* ", lines[-2]), out
        assert _run(root, "sinfo -h -o %D")[1].strip() == "2"

    # A config change reaches the login node's Slurm commands too: sackd takes the reconfigure
    # (it re-execs itself) and fetches the new files, no restart.
    cluster.store.update_config_map("e2e-slurm-configs", slurm_files(
        e2e_cluster(partitions=[{"name": "main", "default": True, "maxTime": "45"}])))
    _wait(lambda: "MaxTime=45" in cluster.exec("e2e-login-0", "cat", "/run/slurm/conf/slurm.conf"), 60,
          "the login node's copy of the new slurm.conf")
    assert "reconfigure failed" not in podman("logs", "e2e-login-0", check=False).stderr

    # The job wrote into the one shared jail, not into a worker container's own filesystem.
    assert (cluster.jail / "home" / "alice" / "from-e2e-worker-1").read_text() == "from-e2e-worker-1\n"
    assert "note.txt" not in cluster.exec("e2e-worker-0", "ls", "/home")

    # Root's own job step, on an unprivileged worker: no CAP_SYS_ADMIN left (no mount), /sys read-only.
    root_step = podman("exec", "e2e-controller-0", "srun", "-N1", "-w", "e2e-worker-0", "sh", "-c",
                       "grep CapBnd /proc/self/status; mount -t tmpfs none /mnt 2>&1; touch /sys/kernel/x 2>&1; "
                       # Opened for writing, never written: were the masks ever gone, the host's kernel
                       # would keep what a test wrote there.
                       "unshare --user true 2>&1; (: >> /proc/sys/kernel/core_pattern) 2>&1 | "
                       f"sed 's/^/core-pattern: /'; {INTO_MUNGED}; "
                       # What slurmstepd loads before the jail (the security review's first finding, as
                       # tried then), and munged's socket directory: read-only here.
                       "(echo required /planted.so >> /var/spool/slurmd/conf-cache/plugstack.conf) 2>&1 | "
                       "sed 's/^/conf-cache: /'; "
                       "(: > /run/munge/planted) 2>&1 | sed 's/^/munge-dir: /'; echo done", check=False).stdout
    bounding = int(root_step.split()[1], 16)
    assert bounding >> 21 & 1 == 0 and root_step.rstrip().endswith("done"), root_step
    assert "permission denied" in root_step.lower() and "Read-only file system" in root_step, root_step
    # Its procfs is its own, yet masked as the runtime masks it: core_pattern is not root's to set.
    assert re.search(r"core-pattern: .*Read-only file system", root_step), root_step
    assert re.search(r"munged-root: [1-9][0-9]* ls: cannot access '/proc/[0-9]+/root/'", root_step), root_step
    assert re.search(r"conf-cache: .*Read-only file system", root_step), root_step
    assert re.search(r"munge-dir: .*Read-only file system", root_step), root_step
    # The node's copy is slurmd's alone, and the next step starts from it as before (with the line in
    # it, that step failed and Slurm drained the node).
    assert "planted" not in cluster.exec("e2e-worker-0", "cat", "/var/spool/slurmd/conf-cache/plugstack.conf")
    assert podman("exec", "e2e-controller-0", "srun", "-N1", "-w", "e2e-worker-0", "true").returncode == 0

    # The door is closed to what the spec does not open: no tunnel through a login shell, and root
    # (whose keys the spec does not list) is refused even with a key that works for alice.
    with ssh(port, "alice", user_key) as client:
        with pytest.raises(paramiko.ChannelException):
            client.get_transport().open_channel("direct-tcpip", ("e2e-controller-0", 6817), ("127.0.0.1", 40000))
    with pytest.raises(paramiko.AuthenticationException):
        ssh(port, "root", user_key)

    # Password logins are refused outright: the server does not even offer the method.
    transport = paramiko.Transport(("127.0.0.1", port))
    transport.connect()
    with pytest.raises(paramiko.BadAuthenticationType) as refused:
        transport.auth_password("alice", "anything")
    transport.close()
    assert "password" not in refused.value.allowed_types

    # A second populate run, plain, changes nothing.
    assert cluster.populate("second")["action"] == "skipped"
    # An overwrite on the live cluster: the nodes are drained and the fill waits for alice's running
    # job to end by itself; then the nodes come back, and her files are as she left them.
    with ssh(port, "alice", user_key) as client:
        job = _run(client, "sbatch --parsable -N1 -w e2e-worker-1 -o /dev/null --wrap 'sleep 8'")[1].strip()
        _wait(lambda: "JobState=RUNNING" in _run(client, f"scontrol -o show job {job}")[1], 60, "job to run")
        assert cluster.populate("overwrite", cluster.overwrite_job)["action"] == "populated"
        assert "JobState=COMPLETED" in _run(client, f"scontrol -o show job {job}")[1]
        # Other nodes may be listed too, until slurmctld shows their drain (then they count as held).
        assert re.search(r"waiting for .*e2e-worker-1 \(ALLOCATED\+", cluster.steps["hold-nodes"]), \
            cluster.steps["hold-nodes"]
        assert "released: e2e-worker-0, e2e-worker-1" in cluster.steps["release-nodes"]
        # Released at once; `idle*` (not responding) was seen once right after the RESUME, on a loaded
        # machine, until slurmctld next heard from the nodes: both must come back idle and responding.
        _wait(lambda: _run(client, "sinfo -h -o '%t %D'")[1].split() == ["idle", "2"], 60, "both nodes idle again")
    assert (cluster.jail / "home" / "alice" / "note.txt").read_text() == "written-on-login\n"


def test_workers_scale_take_a_new_config_and_come_back_with_no_restart(cluster):
    """Dynamic, configless nodes: scaling out and in, a partition limit change under a running job, a
    worker killed without notice and started again under its name, scale to zero with a job pending,
    and last the controller replaced under a running job. slurmctld is one process until then, and no container is replaced by the
    config change."""
    assert cluster.populate("first")["action"] == "populated"
    worker = cluster.pod("StatefulSet", "e2e-worker")
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    for i in range(2):
        cluster.start(f"e2e-worker-{i}", worker)

    def ctl(*argv: str) -> str:
        return podman("exec", "e2e-controller-0", *argv, check=False).stdout

    def idle_nodes() -> list[str]:
        return sorted(line.split()[0] for line in ctl("sinfo", "-h", "-N", "-o", "%N %t").splitlines()
                      if line.split()[1:] == ["idle"])

    def all_nodes() -> list[str]:
        return sorted(set(ctl("sinfo", "-h", "-N", "-o", "%N").split()))

    _wait(lambda: idle_nodes() == ["e2e-worker-0", "e2e-worker-1"], 120, "two workers to register")
    slurmctld = ctl("cat", "/run/slurmctld.pid").strip()
    assert slurmctld

    # Scale out: a third pod registers itself; slurm.conf is not touched.
    cluster.start("e2e-worker-2", worker)
    _wait(lambda: idle_nodes() == ["e2e-worker-0", "e2e-worker-1", "e2e-worker-2"], 120, "the third worker")

    # A partition limit changes while a job runs: the ConfigMap changes under the controller, which
    # reconfigures; the job ends by itself and no container is replaced.
    containers = {name: podman("inspect", "--format", "{{.Id}}", name).stdout.strip()
                  for name in ("e2e-controller-0", "e2e-worker-0", "e2e-worker-1", "e2e-worker-2")}
    job = ctl("sbatch", "--parsable", "-N1", "-w", "e2e-worker-2", "-o", "/dev/null", "--wrap", "sleep 12").strip()
    _wait(lambda: "JobState=RUNNING" in ctl("scontrol", "-o", "show", "job", job), 60, "the job to run")
    changed = slurm_files(e2e_cluster(partitions=[{"name": "main", "default": True, "maxTime": "45"}]))
    cluster.store.update_config_map("e2e-slurm-configs", changed)
    _wait(lambda: "MaxTime=00:45:00" in ctl("scontrol", "show", "partition", "main"), 60, "the new limit")
    assert "JobState=RUNNING" in ctl("scontrol", "-o", "show", "job", job)
    _wait(lambda: "JobState=COMPLETED" in ctl("scontrol", "-o", "show", "job", job), 60, "the job to complete")
    assert {name: podman("inspect", "--format", "{{.Id}}", name).stdout.strip() for name in containers} == containers
    # Every slurmd has the new file (configless: fetched on reconfigure), no restart needed.
    for name in ("e2e-worker-0", "e2e-worker-2"):
        assert "MaxTime=45" in podman("exec", name, "cat", "/run/slurm/conf/slurm.conf").stdout

    # Scale in: pods that go away (SIGTERM) take their node records along.
    podman("stop", "-t", "30", "e2e-worker-2", "e2e-worker-1")
    _wait(lambda: all_nodes() == ["e2e-worker-0"], 60, "Slurm to list the one live worker")

    # A worker killed without notice (no record deleted) comes back under its name and runs a job.
    # Until slurmd's timeout Slurm still shows the old record idle: wait for the new registration.
    def started() -> str:
        return re.findall(r"SlurmdStartTime=(\S+)", ctl("scontrol", "show", "node", "e2e-worker-0"))[0]

    before = started()
    time.sleep(1.1)  # start times have one-second resolution
    podman("rm", "-f", "-t", "0", "e2e-worker-0")
    cluster.start("e2e-worker-0", worker)
    _wait(lambda: started() != before and idle_nodes() == ["e2e-worker-0"], 120, "the worker to register again")
    step = podman("exec", "e2e-controller-0", "srun", "-N1", "-w", "e2e-worker-0", "--chdir=/tmp", "cat",
                  "/etc/soperator-jail-release", check=False)
    assert step.stdout.startswith("soperator jail"), (step.stderr, podman("logs", "e2e-worker-0").stderr[-3000:])
    assert ctl("cat", "/run/slurmctld.pid").strip() == slurmctld

    # Scale to zero: with no worker left, a job for the node set pends (its FUTURE placeholder keeps
    # the node set's place), and runs once a worker is back.
    podman("stop", "-t", "30", "e2e-worker-0")
    _wait(lambda: all_nodes() == [], 60, "no worker left in Slurm")
    waiting = ctl("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip()
    assert waiting, ctl("sinfo")
    # The reason is set by a scheduling pass over the queue: the main scheduler's next one may be a
    # whole sched_interval (60 s) away when nothing else (a node's change) triggers one sooner.
    _wait(lambda: waits_for_nodes(ctl("scontrol", "-o", "show", "job", waiting)), 150, "the job to pend for nodes")
    podman("rm", "e2e-worker-0")
    cluster.start("e2e-worker-0", worker)
    _wait(lambda: "JobState=COMPLETED" in ctl("scontrol", "-o", "show", "job", waiting), 120, "the job to run")

    # The controller's pod replaced under a running job: stopped as a kubelet stops it (SIGTERM to
    # the supervisor, with the rendered capabilities), started again on the same spool with a new
    # address. The job is neither started again nor killed: same start time, COMPLETED 0:0.
    job = ctl("sbatch", "--parsable", "-w", "e2e-worker-0", "-o", "/dev/null", "--wrap", "sleep 25").strip()
    _wait(lambda: "JobState=RUNNING" in ctl("scontrol", "-o", "show", "job", job), 60, "the job to run")
    start = re.findall(r"StartTime=(\S+)", ctl("scontrol", "-o", "show", "job", job))[0]
    podman("stop", "-t", "60", "e2e-controller-0")
    stopped = podman("logs", "e2e-controller-0").stderr
    assert "cannot stop" not in stopped and "Saving all slurm state" in stopped, stopped[-3000:]
    podman("rm", "e2e-controller-0")
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    _wait(lambda: f"JobId={job} " in ctl("scontrol", "-o", "show", "job", job), 120, "the new slurmctld")
    shown = ctl("scontrol", "-o", "show", "job", job)
    assert f"StartTime={start} " in shown and "Restarts=0" in shown, shown
    _wait(lambda: "JobState=COMPLETED" in ctl("scontrol", "-o", "show", "job", job), 90, "the job to complete")
    assert "ExitCode=0:0" in ctl("scontrol", "-o", "show", "job", job)


def test_worker_refuses_to_start_on_an_unpopulated_jail(cluster):
    cluster.start("e2e-worker-0", cluster.pod("StatefulSet", "e2e-worker"))
    code = podman("wait", "e2e-worker-0", timeout=60).stdout.strip()
    logs = podman("logs", "e2e-worker-0").stderr
    assert code == "1"
    assert "the jail at /mnt/jail is not populated" in logs
    assert not (cluster.jail / "etc").exists()
