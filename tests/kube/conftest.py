"""A real single-node Kubernetes for the whole session: the control plane starts when a `kube` test
is selected, the node (containerd, kubelet, kube-proxy, CoreDNS) when a test asks for `node`."""
from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from images.build import build_all, image_ref
from tests.cluster.build import BuildError
from tests.cluster.controlplane import ControlPlane, ControlPlaneError
from tests.cluster.local import LocalCluster
from tests.cluster.node import NodeError, host_leftovers, host_snapshot
from tests.cluster.vm_node import host_leftovers as vm_leftovers
from tests.cluster.tools import ToolsError, ensure_tools
from tests.support.wait import until
from tests.support_paths import ROOT

LOG_KEEP = ROOT / ".cache" / "kube-logs"
_SEQUENCE = itertools.count()


@pytest.fixture(scope="session")
def local_cluster(request):
    """Torn down with `down()`, the code `quickstart.py down` runs, then checked: a process, mount,
    chain, link, address, cgroup, sysctl or path left behind fails the session."""
    workdir = Path(tempfile.mkdtemp(prefix="soperator-kube-"))
    before = host_snapshot()
    cluster = LocalCluster(workdir)
    failed_before = request.session.testsfailed
    try:
        cluster.start_plane()
    except (BuildError, ControlPlaneError, NodeError) as exc:
        cluster.down()
        _keep_logs(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"control plane unavailable: {exc}", pytrace=False)
    yield cluster
    if request.session.testsfailed > failed_before:
        print(f"\n{cluster.plane.logs()}\n(kube logs kept in {LOG_KEEP})")
        _keep_logs(workdir)
    pids = [c.pid() for c in cluster.plane.components + cluster.node.components]
    pids += [c.pid() for c in cluster.vm.daemons()]
    cluster.down()
    left = host_leftovers(workdir) + vm_leftovers() + [f"process {pid}" for pid in pids
                                                       if pid and Path(f"/proc/{pid}").exists()]
    after = host_snapshot()
    left += [f"{key}: {value} before, {after[kind][key]} after" for kind, values in before.items()
             for key, value in values.items() if after[kind][key] != value]
    shutil.rmtree(workdir, ignore_errors=True)
    assert not left, f"the local cluster's down() left these behind: {left}"


@pytest.fixture(scope="session")
def control_plane(local_cluster):
    return local_cluster.plane


@pytest.fixture(scope="session")
def node(local_cluster):
    """The real node, started once; its images are imported by the tests that need them."""
    try:
        return local_cluster.start_node()
    except (BuildError, NodeError) as exc:
        pytest.fail(f"node unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def node_image(node) -> str:
    """The node image (Python, no Slurm daemon started) built and imported into the node's containerd."""
    build_all(only=["node"])
    ref = image_ref("node")
    node.import_images([ref])
    return ref


def _keep_logs(workdir: Path) -> None:
    shutil.rmtree(LOG_KEEP, ignore_errors=True)
    for part in ("plane", "node", "vm"):
        if (workdir / part / "logs").exists():
            shutil.copytree(workdir / part / "logs", LOG_KEEP / part)


@pytest.fixture(scope="session")
def tools():
    try:
        return ensure_tools()
    except ToolsError as exc:
        pytest.fail(str(exc), pytrace=False)


class Kubectl:
    def __init__(self, binary: Path, kubeconfig: Path):
        self.binary, self.kubeconfig = binary, kubeconfig

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.binary), "--kubeconfig", str(self.kubeconfig), *args], input=input,
                              capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc


@pytest.fixture(scope="session")
def kubectl(control_plane, tools) -> Kubectl:
    return Kubectl(tools["kubectl"], control_plane.kubeconfig)


@pytest.fixture(scope="session")
def crd_installed(kubectl):
    install_crd(kubectl)
    return True


def install_crd(kubectl) -> None:
    """The SlurmCluster CRD applied and Established (the tests' and the benches' control planes)."""
    kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
    # Not `kubectl wait --for=condition=Established`: it fails at once, instead of waiting, while the
    # new CRD has no conditions yet ("<nil> is of the type <nil>"; seen once).
    until(lambda: _established(kubectl), 60, "the CRD to be Established")


def _established(kubectl) -> bool:
    crd = json.loads(kubectl("get", "crd", "slurmclusters.slurm.soperator.dev", "-o", "json").stdout)
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def adopt_crd(kubectl, release: str, namespace: str) -> None:
    """Let a slurm-operator release adopt the CRD the session installed with kubectl, as an upgrade
    over a hand-installed CRD would (helm refuses objects that carry no release annotations)."""
    crd = "crd/slurmclusters.slurm.soperator.dev"
    kubectl("label", "--overwrite", crd, "app.kubernetes.io/managed-by=Helm")
    kubectl("annotate", "--overwrite", crd, f"meta.helm.sh/release-name={release}",
            f"meta.helm.sh/release-namespace={namespace}")


@pytest.fixture
def namespace(kubectl, request):
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower().removeprefix("test_"))[:40].strip("-")
    name = f"{stem}-{next(_SEQUENCE)}"
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def service_account_token(kubectl, request):
    """Make a ServiceAccount and return a real token of it. `may_read_metrics` binds it to a ClusterRole
    that may `get` /metrics, or to the role named by it; cluster-scoped objects go after the test."""
    made: list[str] = []

    def make(namespace: str, name: str, may_read_metrics: bool | str = False) -> str:
        kubectl("-n", namespace, "create", "serviceaccount", name)
        if may_read_metrics:
            role = may_read_metrics if isinstance(may_read_metrics, str) else f"{namespace}-{name}-metrics"
            if role != may_read_metrics:
                kubectl("create", "clusterrole", role, "--verb=get", "--non-resource-url=/metrics")
                made.append(f"clusterrole/{role}")
            kubectl("create", "clusterrolebinding", f"{namespace}-{name}", f"--clusterrole={role}",
                    f"--serviceaccount={namespace}:{name}")
            made.append(f"clusterrolebinding/{namespace}-{name}")
        return kubectl("-n", namespace, "create", "token", name).stdout.strip()

    yield make
    if made:
        kubectl("delete", *made, "--ignore-not-found")


@pytest.fixture(scope="session")
def api(control_plane):
    from kubernetes import client

    return client.ApiClient(configuration=_configuration(control_plane))


def _configuration(plane: ControlPlane):
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = plane.url
    cfg.ssl_ca_cert = str(plane.pki.ca_cert)
    cfg.cert_file = str(plane.pki.admin_cert)
    cfg.key_file = str(plane.pki.admin_key)
    return cfg
