"""Test helpers that run real Slurm daemons, the product's own (the node image's Slurm 26.05), in a
container the test owns."""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from images.build import SLURM_RELEASE, build_all, image_ref
from images.podman import PodmanError, podman, podman_env
from soperator.keys import generate_jwt_key
from soperator.node.layout import PATHS

SANDBOX = Path(__file__).with_name("slurm_sandbox.py")
IN_CONTAINER = "/opt/soperator-test/slurm_sandbox.py"
_built: dict[tuple[str, str], str] = {}


def node_image(name: str = "node", release: str = SLURM_RELEASE) -> str:
    """The node image (or one built FROM it: `database`), built once per session if its inputs
    changed: its Slurm is what tests run. `release`: another Slurm's images (images/build.py --slurm),
    those of a cluster being upgraded."""
    if os.geteuid() != 0:
        pytest.skip("needs root for privileged containers")
    if (name, release) not in _built:
        try:
            build_all(only=[name], release=release)
        except (PodmanError, OSError) as exc:
            pytest.fail(f"{name} image build (Slurm {release}) failed: {exc}", pytrace=False)
        _built[name, release] = image_ref(name, release)
    return _built[name, release]


class SlurmSandbox:
    """slurmctld (+ one slurmd) in a privileged container of the node image, with catatonit as PID 1
    to reap what slurmd's daemonized slurmstepds leave; `run` executes commands inside it."""

    def __init__(self, work: Path, files: dict[str, str], hostname: str, munge_key: bytes,
                 names: list[str] = (), slurmd: str | None = None, jail: Path | None = None,
                 prepare_jail: bool = True, node_conf: str = "CPUs=1 RealMemory=1024",
                 mounts: dict[str, Path] | None = None, jwt_key: bytes | None = None, rest: bool = False,
                 accounting: dict | None = None, image: str | None = None, cloud: bool = False):
        """`cloud`: no slurmd at start; the test starts and stops CLOUD nodes' (start_cloud_slurmd)."""
        image = image or node_image()
        self.work, self.hostname = work, hostname
        config = work / "etc-slurm"
        config.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (config / name).write_text(text)
        key = work / "munge.key.src"
        key.write_bytes(munge_key)
        os.chmod(work, 0o755)
        # slurmctld needs the key slurm.conf names (AuthAltParameters) to start at all.
        (work / "jwt.key.src").write_bytes(jwt_key or generate_jwt_key())
        sockets = {}
        if rest:
            # slurmrestd (nobody) makes its socket here; the host reaches it through RestForwarder.
            (work / "rest").mkdir(exist_ok=True)
            os.chmod(work / "rest", 0o777)
            sockets = {"rest_socket": str(self.rest_socket(work)), "ctld_socket": str(self.ctld_socket(work))}
        spec = {**sockets, "jwt_key": str(work / "jwt.key.src"), "hostname": hostname, "names": [hostname, *names], "config_dir": str(config),
                "munge_key": str(key), "slurmd": slurmd, "jail": str(jail) if jail else None,
                "prepare_jail": prepare_jail, "jail_mount": PATHS.jail, "slurmd_log": PATHS.slurmd_log,
                "node_conf": node_conf, "accounting": accounting, "cloud": cloud}
        (work / "spec.json").write_text(json.dumps(spec))
        self.name = f"soperator-slurm-{uuid.uuid4().hex[:10]}"
        volumes = [str(work)] + ([str(jail)] if jail and jail.exists() else [])
        self.proc = subprocess.Popen(
            [shutil.which("podman") or "podman", "run", "-i", "--rm", "--name", self.name, "--init",
             "--privileged", "--network", "none", *[a for v in volumes for a in ("-v", f"{v}:{v}")],
             "-v", f"{SANDBOX}:{IN_CONTAINER}:ro",
             # Files put in place of the image's (path in the container -> file here): a plugin built
             # otherwise, as bench/fail_closed.py measures one.
             *[a for target, source in (mounts or {}).items() for a in ("-v", f"{source}:{target}:ro")],
             "--entrypoint", "python3", image, IN_CONTAINER, str(work)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(work / "sandbox.err", "w"), text=True,
            env=podman_env())
        self.status = self._reply(timeout=120)

    @staticmethod
    def rest_socket(work: Path) -> Path:
        return work / "rest" / "slurmrestd.sock"

    @staticmethod
    def ctld_socket(work: Path) -> Path:
        """Relayed to slurmctld's own HTTP server (metrics, probes) inside the sandbox."""
        return work / "rest" / "slurmctld.sock"

    def _reply(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(f"sandbox gave no answer; stderr: {self.log('sandbox.err')}")
        return json.loads(line)

    def run(self, *argv: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
        self.proc.stdin.write(json.dumps({"run": list(argv), "timeout": timeout, "env": env or {}}) + "\n")
        self.proc.stdin.flush()
        reply = self._reply(timeout + 10)
        return subprocess.CompletedProcess(argv, reply["rc"], reply["out"], reply["err"])

    def start_cloud_slurmd(self, name: str) -> None:
        """The slurmd of a CLOUD record, as an autoscaling node set's worker pod starts it
        (soperator/node/roles.py), here as a daemon (one at a time: the sandbox has one slurmd port)."""
        proc = self.run("slurmd", "-b", "-N", name, "--conf-server", f"{self.hostname}:6817")
        assert proc.returncode == 0, proc.stderr

    def start_netns_slurmd(self, name: str, index: int, node_conf: str = "CPUs=1 RealMemory=1024") -> None:
        """Another dynamic node beside the sandbox's own slurmd, in a network namespace of its own
        (slurm_sandbox.netns_slurmd); `index` (1-200) keeps its addresses apart from the others'."""
        proc = self.run("python3", IN_CONTAINER, "--netns-slurmd", str(self.work), name, str(index), node_conf)
        assert proc.returncode == 0, f"{proc.stderr}\n{self.slurmd_log()}"

    def stop_slurmd(self) -> None:
        """As the pod's end stops it: SIGTERM, then gone."""
        proc = self.run("sh", "-c", "kill $(cat /run/slurmd.pid) && while [ -e /run/slurmd.pid ]; do sleep 0.2; done",
                        timeout=30)
        assert proc.returncode == 0, proc.stderr

    def log(self, name: str) -> str:
        path = self.work / name
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def wait_job(self, job_id: str, timeout: float = 60) -> dict:
        """Poll until the job leaves PENDING/RUNNING; returns its `scontrol show job` fields."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.run("scontrol", "-o", "show", "job", job_id).stdout
            fields = dict(f.split("=", 1) for f in text.split() if "=" in f)
            if fields.get("JobState") not in (None, "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return fields
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} did not finish; slurmd log:\n{self.slurmd_log()}")

    def slurmd_log(self) -> str:
        """slurmd's and every slurmstepd's messages (SlurmdLogFile lands in the work dir)."""
        return self.log("slurmd.log")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        podman("rm", "-f", "-t", "5", self.name, check=False)  # gone already, unless it hung

    def __enter__(self) -> "SlurmSandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_controller(files: dict[str, str], hostname: str, munge_key: bytes, work: Path,
                   worker: tuple[str, str] | None = None, release: str = SLURM_RELEASE) -> dict:
    """Start slurmctld with exactly these config files, and a worker (name, its `slurmd --conf`) if
    given, both of Slurm `release`; return what it serves, or why it did not start."""
    name, conf = worker or (None, "")
    with SlurmSandbox(work, files, hostname, munge_key, names=[name] if name else [], slurmd=name,
                      node_conf=conf, image=node_image(release=release)) as box:
        result = dict(box.status)
        if box.status["ready"]:
            result.update({
                "sinfo": box.run("sinfo", "-h", "-o", "%R|%N").stdout,
                "partitions": box.run("scontrol", "-o", "show", "partition").stdout,
                "nodes": box.run("scontrol", "-o", "show", "node").stdout,
                "config": box.run("scontrol", "show", "config").stdout,
            })
    result["log"] = box.log("slurmctld.log")
    return result
