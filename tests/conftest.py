import pytest

from soperator import kubeyaml
from soperator.api import parse_cluster
from soperator.keys import generate_munge_key, generate_ssh_host_keys
from soperator.render import KeyMaterial
from tests.support_paths import EXAMPLES

pytest_plugins = ["tests.support.rest_slurm"]


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
