from decimal import Decimal

import pytest

from soperator.api import SpecError, parse_cluster
from soperator.api.fields import quantity_value
from tests.conftest import make_cluster


def test_ten_line_manifest_gets_a_working_small_cpu_cluster():
    cluster = parse_cluster({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                             "metadata": {"name": "tiny"}})
    spec = cluster.spec
    assert cluster.namespace == "default"
    assert spec.workers.replicas == 2 and spec.workers.gpus == 0
    assert [p.name for p in spec.partitions] == ["main"] and spec.partitions[0].default
    assert spec.login.service.type == "ClusterIP"
    assert spec.populate_jail.overwrite is False
    assert spec.images.ref("worker").startswith("localhost/soperator/worker:")
    pinned = "registry.example.com/hpc/worker@sha256:" + "a" * 64
    images = make_cluster(images={"registry": "registry.example.com/hpc", "worker": pinned}).spec.images
    assert images.ref("worker") == pinned and images.ref("login").startswith("registry.example.com/hpc/login:")


@pytest.mark.parametrize("text,value", [
    ("1Gi", 2**30), ("64Mi", 64 * 2**20), ("500m", Decimal("0.5")), ("2", 2), ("1.5G", 1_500_000_000),
    ("1e3", 1000), ("0", 0),
])
def test_quantities_parse_like_kubernetes(text, value):
    assert quantity_value(text) == value


@pytest.mark.parametrize("text", ["", "1 Gi", "Gi", "1GiB", "1.2.3", "0x10", "1Mi2"])
def test_malformed_quantities_are_rejected(text):
    with pytest.raises(ValueError):
        quantity_value(text)


def test_integer_quantities_become_strings():
    cluster = make_cluster(workers={"resources": {"requests": {"cpu": 2}}})
    assert cluster.spec.workers.resources.requests == {"cpu": "2"}


def test_every_error_is_reported_not_just_the_first():
    with pytest.raises(SpecError) as exc:
        make_cluster(workers={"replicas": -1, "cpus": 0}, login={"replicas": "x"})
    paths = {e.path for e in exc.value.errors}
    assert {"spec.workers.replicas", "spec.workers.cpus", "spec.login.replicas"} <= paths


def test_status_is_ignored_on_input():
    cluster = parse_cluster({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                             "metadata": {"name": "a"}, "status": {"phase": "Bogus"}})
    assert cluster.status is None


def test_wire_form_round_trips():
    cluster = make_cluster(workers={"replicas": 7, "gpus": 8}, plugStack={"pyxis": True})
    again = parse_cluster(cluster.wire())
    assert again == cluster
    assert cluster.wire()["spec"]["workers"]["realMemoryMib"] == 1024
