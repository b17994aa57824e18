"""A cluster of real containers from our images, configured only by `soperator render`: the jail on
a host directory, populate-jail run as a kubelet runs a Job's pod, node pods started from the rendered
specs (tests/support/podman_pods.py). Shared by the e2e tests and the benches built on them."""
from __future__ import annotations

import copy
import json
import os
import uuid

import paramiko
import pytest

from images.build import build_all, image_ref
from images.podman import PodmanError, podman
from soperator.keys import generate_munge_key, generate_ssh_host_keys
from soperator.render import KeyMaterial, render_all
from soperator.render.populate_jail import populate_jail_job
from tests.cluster.controlplane import free_port
from tests.conftest import make_cluster
from tests.support.cluster_dns import ClusterDns
from tests.support.podman_pods import VolumeStore, start_pod
from tests.support.ssh_session import connect
from tests.support.wait import until

SSH_PORT = 22
MAX_USER_PROCESSES = 200


def e2e_cluster(**extra):
    extra.setdefault("nodeSets", [{"name": "worker", "replicas": 2}])
    return make_cluster(
        name="e2e", uid=str(uuid.uuid4()),
        images={name: image_ref(img) for name, img in (("controller", "controller"), ("worker", "worker"),
                                                        ("login", "login"), ("populateJail", "populate-jail"))}
        | {"pullPolicy": "Never"},
        login={"maxUserProcesses": MAX_USER_PROCESSES, **extra.pop("login", {})},
        slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
                     "extra": {"SchedulerParameters": "batch_sched_delay=0"}},
        **extra)


def add_user(jail, name: str, uid: int, public_key: str) -> None:
    """What an admin does once, as root on a login node; here straight into the volume."""
    with open(jail / "etc" / "passwd", "a") as fh:
        fh.write(f"{name}:x:{uid}:{uid}::/home/{name}:/bin/bash\n")
    with open(jail / "etc" / "group", "a") as fh:
        fh.write(f"{name}:x:{uid}:\n")
    with open(jail / "etc" / "shadow", "a") as fh:
        fh.write(f"{name}:*:19000:0:99999:7:::\n")  # '*' not '!': a locked account refuses keys too
    ssh_dir = jail / "home" / name / ".ssh"
    ssh_dir.mkdir(parents=True)
    (ssh_dir / "authorized_keys").write_text(public_key + "\n")
    for path in (jail / "home" / name, ssh_dir, ssh_dir / "authorized_keys"):
        os.chown(path, uid, uid)
    os.chmod(ssh_dir, 0o700)


class Cluster:
    def __init__(self, tmp_path, **spec):
        self.cluster = e2e_cluster(**spec)
        keys = KeyMaterial(generate_munge_key(), generate_ssh_host_keys())
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in render_all(self.cluster, keys)}
        # The Job the operator makes when overwrite is turned on for this cluster, live by then.
        self.overwrite_job = populate_jail_job(e2e_cluster(**spec, populateJail={"overwrite": True}), hold_nodes=True)
        self.jail = tmp_path / "jail"
        self.jail.mkdir(mode=0o755)
        self.store = VolumeStore(tmp_path / "volumes", self.objects, {"e2e-jail": self.jail})
        self.network = f"soperator-e2e-{uuid.uuid4().hex[:8]}"
        self.dns = ClusterDns(self.network, tmp_path / "dns", image_ref("controller"))
        self.containers: list[str] = []

    def open(self) -> None:
        """The cluster's network and its DNS (PodmanError says what failed; teardown undoes it)."""
        podman("network", "create", "--disable-dns", self.network)
        self.dns.start()

    def pod(self, kind: str, name: str) -> dict:
        pod = self.objects[(kind, name)]["spec"]["template"]["spec"]
        # bench/capabilities.py measures what each capability is for by taking one away.
        drop = os.environ.get("SOPERATOR_E2E_DROP_CAPABILITY")
        if drop:
            pod = copy.deepcopy(pod)
            caps = pod["containers"][0].get("securityContext", {}).get("capabilities", {})
            caps["add"] = [c for c in caps.get("add", []) if c != drop]
        return pod

    def start(self, name: str, pod: dict, extra=()) -> None:
        self.containers.append(name)
        start_pod(name, pod, self.store, self.network, list(extra), address=self.dns.register(name),
                  dns=self.dns.address)

    def populate(self, tag: str, job: dict | None = None) -> dict:
        """Run the Job's pod as a kubelet does: each init container to success, in order, then the
        container. Returns what populate-jail reported; every step's stderr is kept in `self.steps`."""
        pod = (job or self.objects[("Job", "e2e-populate-jail")])["spec"]["template"]["spec"]
        report, self.steps = None, {}
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            name = f"e2e-{container['name']}-{tag}"
            self.start(name, {**pod, "containers": [container]})
            code = podman("wait", name, timeout=600).stdout.strip()
            logs = podman("logs", name)
            self.steps[container["name"]] = logs.stderr
            assert code == "0", (name, logs.stderr)
            if container["name"] == "populate-jail":
                report = json.loads(logs.stdout.strip().splitlines()[-1])["populate-jail"]
        return report

    def exec(self, container: str, *argv: str) -> str:
        return podman("exec", container, *argv).stdout

    def teardown(self) -> None:
        for name in reversed(self.containers):
            podman("rm", "-f", "-t", "5", name, check=False)
        self.dns.stop()
        podman("network", "rm", "-f", self.network, check=False)


def running(tmp_path, **spec):
    """A Cluster with its network, torn down after (unless SOPERATOR_E2E_KEEP): a fixture's body."""
    c = Cluster(tmp_path, **spec)
    try:
        c.open()
    except Exception as exc:  # a failed podman call, or CoreDNS that would not build: leave nothing behind
        c.teardown()
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    try:
        yield c
    finally:  # also when a bench's `with` body raised: no container or network is left behind
        if not os.environ.get("SOPERATOR_E2E_KEEP"):
            for name in c.containers:
                print(f"----- {name}\n{podman('logs', '--tail', '30', name, check=False).stderr}")
            c.teardown()


def build_images() -> dict[str, float]:
    try:
        return build_all()
    except (PodmanError, OSError) as exc:
        pytest.fail(f"image build failed: {exc}", pytrace=False)


def ssh(port: int, user: str, key: paramiko.PKey) -> paramiko.SSHClient:
    return connect("127.0.0.1", port, user, key)  # the login container publishes sshd on loopback


def try_ssh(port, user, key):
    try:
        return ssh(port, user, key)
    except (paramiko.SSHException, OSError):
        return None


def start_with_sessions(cluster: Cluster, node_sets: list[str], users: dict[str, int]) -> dict[str, paramiko.SSHClient]:
    """Each user (name: uid) in the jail with a key of their own; the controller, the first worker of
    each node set and a login node started; once every worker is idle, each user's ssh session."""
    keys = {}
    for user, uid in users.items():
        keys[user] = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") \
            else paramiko.RSAKey.generate(2048)
        add_user(cluster.jail, user, uid, f"{keys[user].get_name()} {keys[user].get_base64()}")
    for name in ("controller", *node_sets):
        cluster.start(f"e2e-{name}-0", cluster.pod("StatefulSet", f"e2e-{name}"))
    port = free_port()
    cluster.start("e2e-login-0", cluster.pod("StatefulSet", "e2e-login"), ["-p", f"127.0.0.1:{port}:{SSH_PORT}"])
    until(lambda: podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t %D", check=False).stdout.split()
          == ["idle", str(len(node_sets))], 120, "the workers to register")
    return {user: until(lambda u=user: try_ssh(port, u, keys[u]), 60, f"sshd for {user}") for user in keys}
