"""A running cluster upgraded in place from Slurm 24.11 to 26.05 on the real node, as an admin does it:
the quick start brings a 24.11 cluster up with accounting (its images built from Debian trixie by
`images/build.py --slurm 24.11`), a user has a job running and one queued, and one change of
`spec.slurmVersion` does the rest through the operator in cluster (tests/support/upgrade_scenario.py).

slurmdbd moves first, then slurmctld, then the workers drain-first, login last; while the long job
runs, its node keeps the 24.11 slurmd under the 26.05 slurmctld (the mixed window); no job is killed;
the job that ran before the upgrade, the one running across it and the one queued behind it are all
in sacct, COMPLETED; every daemon runs 26.05 after. slurm.conf stays written for 24.11 while the jail's own clients are
24.11's; the admin's `populateJail.overwrite` refills the jail from the 26.05 image (user data kept),
and then the config is 26.05's too.
"""
from __future__ import annotations

import os
import subprocess
import sys

import paramiko
import pytest

from images.build import build_all, image_ref
from images.podman import PodmanError
from tests.kube.conftest import adopt_crd
from tests.cluster.node import NODE_IP
from tests.support.ssh_session import Login
from tests.support.upgrade_scenario import PARTS, upgrade
from tests.support_paths import ROOT

pytestmark = [pytest.mark.kube, pytest.mark.e2e]
SCRIPT = ROOT / "examples" / "quickstart.py"
IMAGES = ("controller", "worker", "login", "populate-jail", "operator", "database")
OLD, NEW = "24.11", "26.05"
NAME = "upg"


@pytest.fixture(scope="module")
def both_releases(node) -> None:
    old = [name for name in IMAGES if name != "operator"]
    try:
        build_all()
        build_all(only=old, release=OLD)
    except (PodmanError, OSError) as exc:
        pytest.fail(f"image build failed: {exc}", pytrace=False)
    node.import_images([image_ref(name) for name in IMAGES] + [image_ref(name, OLD) for name in old])


def test_a_running_24_11_cluster_upgrades_to_26_05_and_keeps_every_job(both_releases, local_cluster, tools, kubectl,
                                                                       crd_installed, namespace, tmp_path):
    adopt_crd(kubectl, "soperator", namespace)
    key_file = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_file)], check=True)
    env = {**os.environ, "PATH": f"{tools['kubectl'].parent}:{os.environ['PATH']}"}
    try:
        _upgrade_and_check(local_cluster, tools, kubectl, namespace, key_file, env)
    finally:
        for release in (NAME, f"{NAME}-storage", "soperator"):  # the node's room back for the next test
            subprocess.run([str(tools["helm"]), "--kubeconfig", str(local_cluster.plane.kubeconfig), "uninstall",
                            release, "-n", namespace, "--wait", "--timeout", "180s"], capture_output=True, timeout=240)


def _upgrade_and_check(local_cluster, tools, kubectl, namespace: str, key_file, env: dict) -> None:
    quickstart = subprocess.run(
        [sys.executable, str(SCRIPT), "up", "--kubeconfig", str(local_cluster.plane.kubeconfig),
         "--volumes-dir", str(local_cluster.volumes), "--namespace", namespace, "--cluster-name", NAME,
         "--ssh-key", f"{key_file}.pub", "--timeout", "600", "--slurm-version", OLD, "--accounting", "--skip-ssh",
         "--set-operator", "resyncSeconds=5",
         "--set-operator", f"seccompProfiles.kubeletRootDir={local_cluster.node.workdir / 'kubelet'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    state = kubectl("-n", namespace, "get", "slurmcluster,pods,statefulsets", "-o", "wide").stdout
    assert quickstart.returncode == 0, f"{quickstart.stdout}\n{quickstart.stderr}\n--- objects:\n{state}"
    port = int(kubectl("-n", namespace, "get", "service", f"{NAME}-login", "-o",
                       "jsonpath={.spec.ports[0].nodePort}").stdout)
    login = Login(NODE_IP, port, paramiko.Ed25519Key.from_private_key_file(str(key_file)), timeout=120)
    try:
        assert login.run("scontrol show config | grep '^SLURM_VERSION'").split("=")[1].strip().startswith(OLD)
        versions = login.run("scontrol -o show node | grep -o 'Version=[^ ]*'").split()
        assert len(versions) == 2 and all(v.startswith(f"Version={OLD}.") for v in versions), versions
        run = upgrade(kubectl, namespace, NAME, login, NEW)
    finally:
        login.close()
    print(f"upgrade {OLD} -> {NEW}: {run.seconds} s; parts done at {run.moved}; jobs {run.jobs}; "
          f"jail refilled in {run.jail_seconds} s")

    # slurmdbd, slurmctld, the workers, login: each pass names the part it moves (a quick one may
    # come and go between two looks), never one before a part it already moved.
    assert run.order == sorted(run.order, key=PARTS.index) and {"controller", "workers"} <= set(run.order), run.moved
    assert run.jobs == {"before": "COMPLETED|0:0", "running": "COMPLETED|0:0", "queued": "COMPLETED|0:0"}, \
        run.diagnosis
    assert run.killed == 0
    # The mixed window: a 24.11 slurmd served the running job under the 26.05 slurmctld.
    assert any(ctl == [NEW] and any(v.startswith(OLD) for v in versions) and job == "RUNNING"
               for ctl, versions, job in run.mixed), run.mixed
    assert run.ctld_version.startswith(NEW) and run.node_versions and all(v.startswith(NEW) for v in run.node_versions)
    # Every daemon moved; the jail's clients are still 24.11's, and slurm.conf is written for them (they
    # read it too: 24.11 stops at 25.11's keys).
    status, cond = run.daemons_done
    assert (cond["status"], cond["reason"]) == ("True", "JailClientsOlder") and "populateJail.overwrite" in cond["message"]
    assert status == {"wanted": NEW, "config": OLD, **{part: [NEW] for part in PARTS}, "jail": [OLD]}
    assert "MetricsType" not in run.config_before_jail
    # The admin refills the jail's system files from the 26.05 image: its clients move, and the config with them.
    assert run.jail_client.split()[-1].startswith(f"{NEW}."), run.jail_client  # "slurm-wlm 26.05.5"
    assert run.status == {"wanted": NEW, "config": NEW, **{part: [NEW] for part in (*PARTS, "jail")}}
    assert "MetricsType=metrics/openmetrics" in run.config
