"""Container jobs end to end (Pyxis + enroot) in real containers from the images the charts deploy,
configured only by `soperator render`: real slurmctld and slurmd 26.05, real Pyxis in slurmstepd,
real enroot inside the jail. The image is a Debian 12 squashfs made on this host with `enroot import
podman://` and put in the jail (Debian 13), so a step tells the two apart by /etc/os-release.

Node set `box` has Pyxis; node set `cpu` has not, and keeps refusing user namespaces in job steps."""
from __future__ import annotations

import re
import shutil

import paramiko
import pytest

from images.podman import podman
from soperator.node.layout import PATHS
from soperator.render.configs import slurm_files
from tests.cluster.controlplane import free_port
from tests.support.e2e_cluster import SSH_PORT, add_user, e2e_cluster, running, try_ssh
from tests.support.enroot_host import bookworm_image, import_podman_image
from tests.support.ssh_session import run as _run
from tests.support.wait import until as _wait

pytestmark = pytest.mark.e2e
NODE_SETS = [{"name": "box", "replicas": 2, "pyxis": {"enabled": True}}, {"name": "cpu", "replicas": 1}]
IMAGE = "/home/alice/images/bookworm.sqsh"
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


@pytest.fixture(scope="module")
def sqsh(images, tmp_path_factory):
    work = tmp_path_factory.mktemp("enroot-import")
    import_podman_image(bookworm_image(work), work / "bookworm.sqsh", work)
    yield work / "bookworm.sqsh"
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path, nodeSets=NODE_SETS)


@pytest.fixture
def alice(cluster, sqsh):
    """The cluster up, alice's image in her jail home, and her ssh session on the login node."""
    assert cluster.populate("first")["action"] == "populated"
    key = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") else paramiko.RSAKey.generate(2048)
    add_user(cluster.jail, "alice", 1000, f"{key.get_name()} {key.get_base64()}")
    images = cluster.jail / "home" / "alice" / "images"
    images.mkdir()
    shutil.copy(sqsh, images / "bookworm.sqsh")
    (images / "corrupt.sqsh").write_bytes(b"not a squashfs\n" * 1000)
    for path in (images, images / "bookworm.sqsh", images / "corrupt.sqsh"):
        shutil.chown(path, 1000, 1000)
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    for name in ("e2e-box-0", "e2e-box-1"):
        cluster.start(name, cluster.pod("StatefulSet", "e2e-box"))
    cluster.start("e2e-cpu-0", cluster.pod("StatefulSet", "e2e-cpu"))
    port = free_port()
    cluster.start("e2e-login-0", cluster.pod("StatefulSet", "e2e-login"), ["-p", f"127.0.0.1:{port}:{SSH_PORT}"])
    _wait(lambda: podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t %D", check=False).stdout.split()
          == ["idle", "3"], 120, "three workers to register")
    client = _wait(lambda: try_ssh(port, "alice", key), 60, "sshd on the login node")
    yield client
    client.close()


def _finished(client, job: str) -> str:
    def state():
        shown = _run(client, f"scontrol -o show job {job}")[1]
        found = re.search(r"JobState=(\S+)", shown)
        return found.group(1) if found and found.group(1) in DONE else None
    return _wait(state, 180, f"job {job}")


def _sbatch(client, options: str, script: str) -> str:
    code, out, err = _run(client, f"cat > job.sh <<'EOF'\n#!/bin/bash\n{script}\nEOF\nsbatch --parsable {options} job.sh")
    assert code == 0, err
    return out.strip()


def test_container_jobs_run_the_image_on_pyxis_workers_and_leave_the_node_usable(cluster, alice):
    client = alice
    # A batch job in the container: its steps see the image's OS; its output lands in the jail.
    job = _sbatch(client, f"-N1 -w e2e-box-0 --container-image={IMAGE} -o /home/alice/batch-%j.out",
                  "grep ^VERSION_ID= /etc/os-release; test -e /etc/soperator-jail-release && echo jail-files "
                  "|| echo no-jail-files; id -un")
    assert _finished(client, job) == "COMPLETED"
    assert _run(client, f"cat ~/batch-{job}.out")[1].split() == ['VERSION_ID="12"', "no-jail-files", "alice"]
    # The login node itself is the jail, Debian forky (testing: no VERSION_ID).
    assert _run(client, "grep ^VERSION_CODENAME= /etc/os-release")[1].strip() == "VERSION_CODENAME=forky"

    # Across both Pyxis workers.
    code, out, err = _run(client, f"srun -N2 -p main -w e2e-box-0,e2e-box-1 --container-image={IMAGE} "
                                  "sh -c 'echo $(hostname) $(grep ^VERSION_ID= /etc/os-release)'", timeout=180)
    assert code == 0, err
    assert sorted(out.splitlines()) == ['e2e-box-0 VERSION_ID="12"', 'e2e-box-1 VERSION_ID="12"']

    # A directory of the jail mounted in, and the working directory set.
    _run(client, "mkdir -p ~/data && echo input-from-the-jail > ~/data/in")
    code, out, err = _run(client, f"srun -w e2e-box-1 --container-image={IMAGE} --container-mounts=/home/alice/data:/data "
                                  "--container-workdir=/data sh -c 'pwd; cat in; echo written > out'", timeout=120)
    assert (code, out.split()) == (0, ["/data", "input-from-the-jail"]), err
    assert (cluster.jail / "home" / "alice" / "data" / "out").read_text() == "written\n"

    # A named container: created once, then reused by a later step without an image (no second unpack:
    # what the first step wrote in its root is still there).
    code, _, err = _run(client, f"srun -w e2e-box-0 --container-image={IMAGE} --container-name=keep "
                                "--container-writable sh -c 'echo from-the-first-step > /marker'", timeout=120)
    assert code == 0, err
    code, out, err = _run(client, "srun -w e2e-box-0 --container-name=keep --container-writable cat /marker", timeout=120)
    assert (code, out.strip()) == (0, "from-the-first-step"), err
    # enroot keeps it on the worker's own volume, one directory per user; nothing of it in the shared jail.
    kept = cluster.exec("e2e-box-0", "ls", "/run/enroot/user-1000/data").split()
    assert kept == ["pyxis_keep"]
    assert not any((cluster.jail / "run" / "enroot").iterdir())

    # --container-remap-root: root inside the container, alice outside it.
    code, out, err = _run(client, f"srun -w e2e-box-1 --container-image={IMAGE} --container-remap-root id -u", timeout=120)
    assert (code, out.strip()) == (0, "0"), err
    assert _run(client, f"srun -w e2e-box-1 --container-image={IMAGE} id -u", timeout=120)[1].strip() == "1000"

    # A missing image and a corrupt one: the step fails with Pyxis's own error, the node stays in service.
    code, out, err = _run(client, "srun -w e2e-box-0 --container-image=/home/alice/images/missing.sqsh true", timeout=120)
    assert code != 0 and "pyxis:" in err, (code, out, err)
    job = _sbatch(client, "-N1 -w e2e-box-0 --container-image=/home/alice/images/corrupt.sqsh -o /home/alice/bad-%j.out",
                  "echo ran")
    assert _finished(client, job) == "FAILED"
    output = _run(client, f"cat ~/bad-{job}.out")[1]
    assert "pyxis:" in output and "ran" not in output.split(), output
    assert _run(client, "sinfo -h -n e2e-box-0 -o %t")[1].strip() == "idle"
    assert _run(client, "srun -w e2e-box-0 cat /etc/soperator-jail-release", timeout=60)[1].startswith("soperator jail")


def test_only_pyxis_node_sets_open_user_namespaces_and_enroot_runs_only_in_the_jail(cluster, alice):
    client = alice
    probe = "unshare --user true 2>/dev/null && echo userns-created || echo userns-refused"
    assert _run(client, f"srun -w e2e-box-0 sh -c '{probe}'", timeout=60)[1].strip() == "userns-created"
    assert _run(client, f"srun -w e2e-cpu-0 sh -c '{probe}'", timeout=60)[1].strip() == "userns-refused"
    # The Pyxis worker runs under soperator's seccomp profile (the chart's file): the container's root
    # holds CAP_SYS_ADMIN, which the runtime's default would let set the pod's host name; this refuses.
    sethostname = "import errno, socket\ntry: socket.sethostname('x')\nexcept OSError as e: print(errno.errorcode[e.errno])"
    assert cluster.exec("e2e-box-0", "python3", "-c", sethostname).strip() == "EPERM"
    # io_uring is not offered (ENOSYS, as from a kernel without it); the kernel itself says EFAULT.
    io_uring_setup = ("import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                      "print(libc.syscall(425, 1, None), errno.errorcode[ctypes.get_errno()])")
    assert cluster.exec("e2e-box-0", "python3", "-c", io_uring_setup).split() == ["-1", "ENOSYS"]
    assert cluster.exec("e2e-box-0", "grep", "^Seccomp:", "/proc/1/status").split() == ["Seccomp:", "2"]
    # Root's own step on the Pyxis worker still cannot mount on the node: SYS_ADMIN is out of its
    # bounding set.
    root_step = podman("exec", "e2e-controller-0", "srun", "-w", "e2e-box-0", "sh", "-c",
                       "mount -t tmpfs none /mnt 2>&1; echo done", check=False).stdout
    assert "permission denied" in root_step.lower() and root_step.rstrip().endswith("done"), root_step
    # A container job sent to a node set without Pyxis fails at once with the reason, runs nothing
    # uncontained, and leaves nothing in the shared jail (the jail's own enroot.conf sees to it).
    code, out, err = _run(client, f"srun -w e2e-cpu-0 --container-image={IMAGE} grep ^VERSION_ID= /etc/os-release",
                          timeout=120)
    assert code != 0 and "VERSION_ID" not in out, (code, out, err)
    assert "pyxis:" in err and "enroot-runs-only-on-node-sets-with-pyxis" in err, err
    assert not (cluster.jail / "home" / "alice" / ".local").exists()
    assert not (cluster.jail / "home" / "alice" / ".cache").exists()

    # enroot exists only in the jail, so a Pyxis call made before the step entered it would fail. The
    # order of the two plugins is not what keeps it there: slurmstepd runs each SPANK callback through
    # every plugin before the next callback, the jail is entered in init_post_opt, and Pyxis calls enroot
    # from user_init on. With Pyxis listed first, container jobs still run.
    assert cluster.exec("e2e-box-0", "sh", "-c", "command -v enroot || echo none").strip() == "none"
    files = slurm_files(e2e_cluster(nodeSets=NODE_SETS))
    lines = files["plugstack.conf"].splitlines()
    chroot = next(i for i, line in enumerate(lines) if "spank_chroot.so" in line)
    pyxis = next(i for i, line in enumerate(lines) if "spank_pyxis.so" in line)
    assert chroot < pyxis  # what soperator writes
    lines[chroot], lines[pyxis] = lines[pyxis], lines[chroot]
    cluster.store.update_config_map("e2e-slurm-configs", {**files, "plugstack.conf": "\n".join(lines) + "\n"})
    _wait(lambda: "spank_pyxis.so" in cluster.exec("e2e-box-0", "cat", "/run/slurm/conf/plugstack.conf")
          .split("spank_chroot.so")[0], 90, "the swapped plugstack.conf on the worker")
    code, out, err = _run(client, f"srun -w e2e-box-0 --container-image={IMAGE} grep ^VERSION_ID= /etc/os-release",
                          timeout=120)
    assert (code, out.strip()) == (0, 'VERSION_ID="12"'), err


def _as_user(cluster, user: str, uid: int, command: str) -> tuple[int, str, str]:
    """`command` as `user` in the jail on the login node, as in that user's own session."""
    proc = podman("exec", "e2e-login-0", "chroot", f"--userspec={uid}:{uid}", "/mnt/jail", "env", f"HOME=/home/{user}",
                  f"USER={user}", "sh", "-c", f"cd && {command}", check=False, timeout=180)
    return proc.returncode, proc.stdout, proc.stderr


def test_no_user_can_plant_a_container_that_another_users_step_runs(cluster, alice):
    # Security review, high #1: Pyxis and enroot trust whatever they find under a user's directory.
    for user, uid in (("mallory", 1001), ("bob", 1002)):
        add_user(cluster.jail, user, uid, "")
    # The parents are root's: Mallory cannot make Bob's directories in them.
    code, out, err = _as_user(cluster, "mallory", 1001, "srun -w e2e-box-0 sh -c 'mkdir -p "
                              "/run/enroot/user-1002/data/pyxis_torch; a=$?; mkdir /run/pyxis/1002; echo $a $?'")
    assert (code, out.split(), err.count("Permission denied")) == (0, ["1", "1"], 2), (code, out, err)
    assert cluster.exec("e2e-box-0", "stat", "-c", "%u %a", "/run/enroot", "/run/pyxis").split() == ["0", "755"] * 2
    assert "user-1002" not in cluster.exec("e2e-box-0", "ls", "/run/enroot").split()

    # A container planted anyway under Bob's name (here by root; with the parents open, any user could):
    # a root filesystem whose /etc/rc, which enroot runs as a container starts, leaves a mark in it.
    planted = "/run/enroot/user-1002/data/pyxis_torch"
    cluster.exec("e2e-box-0", "chroot", "/mnt/jail", "sh", "-c",
                 f"mkdir -p {planted.rsplit('/', 1)[0]} && unsquashfs -q -d {planted} {IMAGE}")
    cluster.exec("e2e-box-0", "sh", "-c", f"printf '#!/bin/sh\\ntouch /planted-ran\\nexec \"$@\"\\n' > {planted}/etc/rc "
                 f"&& chmod 755 {planted}/etc/rc && chown -R 1001:1001 /run/enroot/user-1002")
    torch = f"srun -w e2e-box-0 --container-name=torch --container-writable --container-image={IMAGE} id -un"
    code, out, err = _as_user(cluster, "bob", 1002, torch)
    assert code != 0 and "bob" not in out.split(), (code, out, err)
    # Slurm 26.05 fails the step before any task: the user sees Slurm's word, the node's log the reason.
    assert "Spank plugin failure, job failed" in err, err
    assert ("soperator_chroot: its container runtime directories are not safe to use: /run/enroot/user-1002 is not "
            "the job user's own (uid 1002): it is a directory of uid 1001") in cluster.exec(
                "e2e-box-0", "cat", PATHS.slurmd_log)
    assert "planted-ran" not in cluster.exec("e2e-box-0", "ls", planted).split()
    assert cluster.exec("e2e-box-0", "stat", "-c", "%u", "/run/enroot/user-1002").strip() == "1001"

    # Had it been Bob's own, the same step would have run it: the mark is what the refusal prevented.
    cluster.exec("e2e-box-0", "chown", "-R", "1002:1002", "/run/enroot/user-1002")
    code, out, err = _as_user(cluster, "bob", 1002, torch)
    assert (code, out.strip()) == (0, "bob"), err
    assert "planted-ran" in cluster.exec("e2e-box-0", "ls", planted).split()

    # Elsewhere Bob's container steps run in directories made for him alone.
    code, out, err = _as_user(cluster, "bob", 1002, f"srun -w e2e-box-1 --container-image={IMAGE} "
                              "grep ^VERSION_ID= /etc/os-release")
    assert (code, out.strip()) == (0, 'VERSION_ID="12"'), err
    assert cluster.exec("e2e-box-1", "stat", "-c", "%u %a", "/run/enroot/user-1002", "/run/pyxis/1002").split() == [
        "1002", "700"] * 2
