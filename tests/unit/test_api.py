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
    assert [(n.name, n.replicas, n.gpus) for n in spec.node_sets] == [("worker", 2, 0)]
    assert [p.name for p in spec.partitions] == ["main"] and spec.partitions[0].default
    assert spec.login.service.type == "ClusterIP"
    assert spec.populate_jail.overwrite is False
    assert spec.image("worker").startswith("localhost/soperator/worker:")
    pinned = "registry.example.com/hpc/worker@sha256:" + "a" * 64
    images = make_cluster(images={"registry": "registry.example.com/hpc", "worker": pinned}).spec.images
    assert images.ref("worker", "26.05") == pinned and images.ref("login", "26.05").startswith("registry.example.com/hpc/login:")


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
    cluster = make_cluster(nodeSets=[{"name": "cpu", "resources": {"requests": {"cpu": 2}}}])
    assert cluster.spec.node_sets[0].resources.requests == {"cpu": "2"}


def test_every_error_is_reported_not_just_the_first():
    with pytest.raises(SpecError) as exc:
        make_cluster(nodeSets=[{"name": "cpu", "replicas": -1, "cpus": 0}], login={"replicas": "x"})
    paths = {e.path for e in exc.value.errors}
    assert {"spec.nodeSets[0].replicas", "spec.nodeSets[0].cpus", "spec.login.replicas"} <= paths


def test_status_is_ignored_on_input():
    cluster = parse_cluster({"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                             "metadata": {"name": "a"}, "status": {"phase": "Bogus"}})
    assert cluster.status is None


def test_wire_form_round_trips():
    cluster = make_cluster(nodeSets=[{"name": "gpu", "replicas": 7, "gpus": 8, "pyxis": {"enabled": True}}])
    again = parse_cluster(cluster.wire())
    assert again == cluster
    assert cluster.wire()["spec"]["nodeSets"][0]["realMemoryMib"] == 1024


NODE_SET_CASES = [
    ({"nodeSets": [{"name": "cpu"}, {"name": "cpu"}]}, "spec.nodeSets", "duplicate name 'cpu'"),
    ({"nodeSets": [{"name": "cpu"}], "partitions": [{"name": "main", "nodeSets": ["gpu"]}]},
     "spec.partitions[0].nodeSets[0]", "no node set 'gpu'"),
    ({"nodeSets": [{"name": "cpu", "gpuType": "h100"}]}, "spec.nodeSets[0].gpuType", "gpuType needs gpus > 0"),
    ({"nodeSets": [{"name": "cpu", "gres": ["gpu:2"]}]}, "spec.nodeSets[0].gres", "GPUs are set by gpus (it is 0)"),
    ({"nodeSets": [{"name": "a", "features": ["b"]}, {"name": "b"}]}, "spec.nodeSets[0].features[0]",
     "another node set's name"),
    ({"nodeSets": [{"name": "login"}]}, "spec.nodeSets[0].name", "reserved"),
    ({"nodeSets": [{"name": "cpu", "hostUsers": False, "gpus": 1}]}, "spec.nodeSets[0].hostUsers",
     "device confinement needs the Kubernetes node's user namespace"),
    ({"nodeSets": [{"name": "cpu", "hostUsers": False, "gres": ["shard:2"]}]}, "spec.nodeSets[0].hostUsers",
     "false with gpus or gres"),
    ({"nodeSets": [{"name": "a" * 41}]}, "spec.nodeSets[0].name", "at most 40"),
    ({"nodeSets": []}, "spec.nodeSets", "at least 1"),
    ({"nodeSets": [{"name": "cpu", "replicas": 600}, {"name": "gpu", "replicas": 600}]}, "spec.nodeSets",
     "maxNodeCount"),
    ({"nodeSets": [{"name": "cpu", "subMounts": [{"name": "s", "mountPath": "/s", "claimName": "c"},
                                                 {"name": "s", "mountPath": "/t", "claimName": "d"}]}]},
     "spec.nodeSets[0].subMounts", "duplicate name 's'"),
]


@pytest.mark.parametrize("spec,path,message", NODE_SET_CASES, ids=[c[1] + ":" + c[2][:20] for c in NODE_SET_CASES])
def test_bad_node_sets_are_refused_with_the_field_named(spec, path, message):
    with pytest.raises(SpecError) as exc:
        make_cluster(**spec)
    assert any(e.path == path and message in e.message for e in exc.value.errors), exc.value.errors


def test_a_node_set_statefulset_name_must_fit_kubernetes_limits():
    """`<cluster>-<node set>` names the StatefulSet, its pods and its Slurm nodes: at most 52 characters,
    for the pods' controller-revision-hash label."""
    make_cluster(name="c" * 40, nodeSets=[{"name": "n" * 11}])
    with pytest.raises(SpecError) as exc:
        make_cluster(name="c" * 40, nodeSets=[{"name": "n" * 12}])
    assert [e.path for e in exc.value.errors] == ["spec.nodeSets[0].name"]
    assert "53 characters" in str(exc.value)


@pytest.mark.parametrize("spec", [
    {"nodeSets": [{"name": "ib", "gres": ["ib:4"], "gresFiles": {"ib": "/dev/infiniband/uverbs[0-3]"}}]},
    {"nodeSets": [{"name": "ib", "gres": ["ib:3"], "gresFiles": {"ib": "/dev/infiniband/uverbs[0,2-3]"}}]},
    {"nodeSets": [{"name": "gpu", "gpus": 2, "gres": ["shard:8"]}]},
    {"nodeSets": [{"name": "gpu", "gpus": 2, "cpus": 8, "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "8"},
                                                                      "limits": {"nvidia.com/gpu": 2, "cpu": "8"}}}]},
    {"nodeSets": [{"name": "cpu", "autoscale": {"max": 2, "resumeTimeout": 300}}],
     "partitions": [{"name": "main", "default": True, "extra": {"ResumeTimeout": "301"}}]},
    {"healthCheck": {"program": "/usr/sbin/nhc", "interval": 60, "nodeStates": ["START_ONLY"]}},
    {"plugStack": {"custom": ["required /usr/lib/site/spank_x.so", "optional /opt/tmp/y.so"]},
     "healthCheck": {"program": "/opt/tmp/check", "interval": 60}},
    {"identity": {"ldap": {"uris": ["ldap://10.20.0.5"], "startTls": True, "searchBase": "dc=e,dc=org",
                           "egressCidrs": ["10.20.0.0/24"], "userFilter": "(&(uid=*)(|(a=1)(!(b=2))))"}},
     "jail": {"subMounts": [{"name": "home", "mountPath": "/home", "claimName": "homes"}]}},
    {"identity": {"ldap": {"uris": ["ldaps://10.20.0.5"], "searchBase": "dc=e,dc=org"}},
     "networkPolicy": {"enabled": False}},
    {"login": {"resources": {"limits": {"memory": "8Gi"}}, "sessionLimits": {"memory": "8Gi", "cpu": "175921860"}}},
    {"nodeSets": [{"name": "gpu", "pyxis": {"enabled": True, "storageSize": "50Gi", "imageCache": {"size": "49Gi"},
                                            "enrootConfig": {"ENROOT_SQUASH_OPTIONS": "-comp xz -Xbcj x86 -b 1M"}}}]},
    {"accounting": {"enabled": True, "external": {"host": "db.localhost.example.org", "passwordSecret": "db"}},
     "slurmConfig": {"extra": {"JobCompLoc": "http://es.example.org:9200/slurm"}}},
    {"jail": {"subMounts": [{"name": "scratch", "mountPath": "/var/runner", "claimName": "s"}]}},
])
def test_the_third_passs_rules_leave_their_valid_neighbours_alone(spec):
    """Next to each class issue 64 refuses (tests/data/bad_crs): the valid case it must not catch."""
    make_cluster(**spec)
