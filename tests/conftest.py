import pytest
from hypothesis import settings

from soperator import kubeyaml
from soperator.api import parse_cluster
from soperator.keys import generate_munge_key, generate_ssh_host_keys
from soperator.render import KeyMaterial
from tests.support_paths import EXAMPLES

pytest_plugins = ["tests.support.rest_slurm"]

# No per-example deadline anywhere: the suite runs in two processes on two cores, and an example's time
# then says how busy the other process is, not whether the code is slow (no test asserts a time).
settings.register_profile("soperator", deadline=None)
settings.load_profile("soperator")


def worker_group(nodeid: str) -> str:
    """Which tests one pytest-xdist worker runs, one after another; groups run in parallel.

    tests/kube: the one local Kubernetes node a host can hold (tests/cluster/local.py refuses a second).
    tests/e2e: the podman cluster's containers and network, whose names are fixed. tests/unit and
    tests/charts: each test by itself (they have no module-scoped fixtures), so the two workers share
    them evenly. Any other module: itself, so its module-scoped fixtures are set up once."""
    path = nodeid.split("::", 1)[0]
    for folder in ("tests/kube/", "tests/e2e/"):
        if path.startswith(folder):
            return folder.rstrip("/")
    if path.startswith(("tests/unit/", "tests/charts/")):
        return nodeid
    return path


def pytest_xdist_make_scheduler(config, log):
    """xdist's own scope scheduler, its scopes our groups. Not `--dist loadgroup`: xdist 3.8 marks a
    group by rewriting a test's `_nodeid`, which pytest 9.2 no longer reads."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def keys() -> KeyMaterial:
    return KeyMaterial(munge_key=generate_munge_key(), ssh_host_keys=generate_ssh_host_keys())


def load_example(path):
    with open(path) as fh:
        return parse_cluster(kubeyaml.load(fh.read()))


@pytest.fixture(params=EXAMPLES, ids=lambda p: p.stem)
def example(request):
    return load_example(request.param)


def make_cluster(name="demo", uid=None, **spec):
    meta = {"name": name, "namespace": "hpc"}
    if uid:
        meta["uid"] = uid
    return parse_cluster({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                          "metadata": meta, "spec": spec})
