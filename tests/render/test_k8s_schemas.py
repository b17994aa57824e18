"""Every rendered object must be valid for the real Kubernetes API (official schemas, strict mode)."""
import pytest

from soperator.render import render_all
from tests.conftest import make_cluster
from tests.support import k8s_schema

VERSIONS = ["1.31", "1.35"]


def _all_objects(cluster, keys):
    return render_all(cluster, keys)


@pytest.mark.parametrize("version", VERSIONS)
def test_example_objects_validate(example, keys, version):
    for obj in _all_objects(example, keys):
        k8s_schema.validate(obj, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_variant_objects_validate(keys, version):
    cluster = make_cluster(uid="0b5d2f8e-1111-2222-3333-444455556666",
                           controller={"spool": {"claimName": "spool", "storageClassName": "fast"}},
                           jail={"volume": {"hostPath": "/srv/jail"}},
                           nodeSets=[{"name": "a", "replicas": 0, "scheduling": {"affinity": {"nodeAffinity": {
                               "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                                   {"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}}}},
                               {"name": "b", "image": "registry.example.com/hpc/worker:2", "localVolume": {
                                   "mountPath": "/local", "size": "1Ti", "storageClassName": "nvme"},
                                "subMounts": [{"name": "data", "mountPath": "/data", "claimName": "data"}]}])
    for obj in _all_objects(cluster, keys):
        k8s_schema.validate(obj, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("database", [{}, {"managed": {"claimName": "acct-db"}},
                                      {"external": {"host": "db.example", "passwordSecret": "db"}}])
def test_accounting_objects_validate(keys, version, database):
    from soperator.render.accounting import accounting_objects, slurmdbd_conf_secret

    cluster = make_cluster(accounting={"enabled": True, **database})
    conf = slurmdbd_conf_secret(cluster, "0123abcd")
    for obj in [*_all_objects(cluster, keys), conf, *accounting_objects(cluster, conf["metadata"]["name"])]:
        k8s_schema.validate(obj, version)


def test_strict_validation_catches_a_typo(keys):
    obj = [o for o in render_all(make_cluster(), keys) if o["kind"] == "StatefulSet"][-1]
    obj["spec"]["template"]["spec"]["containerz"] = []
    with pytest.raises(k8s_schema.ValidationError):
        k8s_schema.validate(obj, "1.31")
