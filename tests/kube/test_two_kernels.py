"""The user's path across two nodes on two kernels: the host node (cgroup v1) and the VM node (cgroup
v2, tests/cluster/vm_node.py). The quick start with `--nodes 2` puts the login, the controller and a
worker on the host and one more node set, `emulated`, on the VM; a user who ssh'es to the login node
on the host runs a job step on the VM, and a two-node `srun` spans both kernels, every step in the
one jail both nodes mount."""
from __future__ import annotations

import os
import subprocess

import paramiko
import pytest

from images.build import build_all, image_ref
from tests.cluster.node import NODE_IP
from tests.cluster.vm_node import NAME as VM_NAME
from tests.kube.conftest import adopt_crd
from tests.support.quickstart_run import quickstart_up
from tests.support.ssh_session import Login

pytestmark = [pytest.mark.kube, pytest.mark.e2e]
IMAGES = ("controller", "worker", "login", "populate-jail", "operator", "database")
NAME = "two"
# Each step says where it ran: its host, its kernel, the type of its cgroup file system, and what it
# read of a file the login session wrote into the jail.
STEP = ("echo \"$(hostname) $(uname -r) $(stat -fc %T /sys/fs/cgroup) $(cat /root/across/from-login)\" "
        "> /root/across/$(hostname)")


@pytest.fixture(scope="module")
def two_nodes(local_cluster, node):
    build_all()
    node.import_images([image_ref(name) for name in IMAGES])
    yield local_cluster.start_vm([image_ref("worker")])
    local_cluster.vm.stop()


def test_a_job_spans_the_host_and_the_vm_in_one_jail(two_nodes, local_cluster, tools, kubectl, crd_installed,
                                                     namespace, tmp_path):
    adopt_crd(kubectl, "soperator", namespace)
    key_file = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_file)], check=True)
    quickstart = quickstart_up(local_cluster, tools, namespace, NAME, key_file, "--timeout", "1200", "--nodes", "2",
                               "--workers", "1", timeout=1500)
    state = kubectl("-n", namespace, "get", "slurmcluster,pods,jobs,statefulsets,pvc", "-o", "wide").stdout
    assert quickstart.returncode == 0, f"{quickstart.stdout}\n{quickstart.stderr}\n--- objects:\n{state}"
    pods = kubectl("-n", namespace, "get", "pods", "-o",
                   "jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{\"\\n\"}{end}").stdout
    placed = dict(line.split("=") for line in pods.split())
    assert placed[f"{NAME}-emulated-0"] == VM_NAME
    assert placed[f"{NAME}-worker-0"] == placed[f"{NAME}-login-0"] != VM_NAME

    port = int(kubectl("-n", namespace, "get", "service", f"{NAME}-login", "-o",
                       "jsonpath={.spec.ports[0].nodePort}").stdout)
    login = Login(NODE_IP, port, paramiko.Ed25519Key.from_private_key_file(str(key_file)), timeout=300)
    try:
        login.run("mkdir -p /root/across && echo written-at-login > /root/across/from-login")
        # A step on the VM alone, then one step on each kernel.
        login.run(f"srun -w {NAME}-emulated-0 bash -c '{STEP}'")
        alone = login.run(f"cat /root/across/{NAME}-emulated-0").split()
        login.run(f"rm /root/across/{NAME}-emulated-0")
        login.run(f"srun -N2 -w {NAME}-worker-0,{NAME}-emulated-0 bash -c '{STEP}'")
        steps = {host: login.run(f"cat /root/across/{host}").split() for host in
                 (f"{NAME}-worker-0", f"{NAME}-emulated-0")}
        login_kernel = login.run("uname -r").strip()
    finally:
        login.close()
    emulated, host = steps[f"{NAME}-emulated-0"], steps[f"{NAME}-worker-0"]
    assert alone == emulated
    assert emulated[0] == f"{NAME}-emulated-0" and emulated[2] == "cgroup2fs" and emulated[3] == "written-at-login"
    assert host[0] == f"{NAME}-worker-0" and host[2] != "cgroup2fs" and host[3] == "written-at-login"
    assert host[1] == login_kernel == os.uname().release != emulated[1]  # two kernels
    # The VM's step wrote into the jail on the host's disk.
    jail = local_cluster.volumes / f"{namespace}-{NAME}-jail"
    assert (jail / "root" / "across" / f"{NAME}-emulated-0").read_text().split() == emulated
    subprocess.run([str(tools["helm"]), "--kubeconfig", str(local_cluster.plane.kubeconfig), "-n", namespace,
                    "uninstall", NAME, f"{NAME}-storage", "soperator", "--wait", "--timeout", "300s"], check=True,
                   capture_output=True)
