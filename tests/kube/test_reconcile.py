"""The reconcile function against the real control plane: order, gates, keys, status, no-op writes."""
from __future__ import annotations

import base64
import json
from collections import Counter

import pytest
import yaml

from soperator.kube import Kube
from soperator.api import parse_cluster
from soperator.node.layout import CONFIG_SEEN_ANNOTATION, JWT_KEY_FILE
from soperator.reconcile import reconcile
from soperator.reconcile.config_nudge import configs_digest
from soperator.render.secrets import jwt_key_secret_name
from soperator.slurm.cluster_client import SlurmClients
from tests.support.wait import until
from tests.support_paths import GOOD_CRS, ROOT

pytestmark = pytest.mark.kube
API = "slurm.soperator.dev/v1alpha1"


@pytest.fixture
def kube(api) -> Kube:
    return Kube(api)


def _create(kubectl, namespace, name, **spec) -> None:
    doc = {"apiVersion": API, "kind": "SlurmCluster", "metadata": {"name": name, "namespace": namespace},
           "spec": spec}
    kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))


def _body(kube, namespace, name) -> dict:
    return kube.get(API, "SlurmCluster", namespace, name)


def _names(kube, namespace, kind, api="v1") -> list[str]:
    res = kube.dynamic.resources.get(api_version=api, kind=kind)
    items = res.get(namespace=namespace, label_selector="app.kubernetes.io/managed-by=soperator").to_dict()["items"]
    return sorted(i["metadata"]["name"] for i in items)


def _finish_job(kubectl, namespace, name, success=True) -> None:
    """No kubelet runs pods here: finish the Job through its status subresource, as envtest users do."""
    import datetime
    import time

    live = {}
    for _ in range(50):  # the real job controller sets startTime first; keep it
        live = json.loads(kubectl("-n", namespace, "get", "job", name, "-o", "json").stdout)
        if live.get("status", {}).get("startTime"):
            break
        time.sleep(0.1)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    conds = ([{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}] if success
             else [{"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"},
                   {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit"}])
    for c in conds:
        c.update({"lastProbeTime": now, "lastTransitionTime": now})
    status = {"conditions": conds, "startTime": live["status"]["startTime"], "active": 0, "ready": 0, "terminating": 0,
              "succeeded": 1 if success else 0, "failed": 0 if success else 3}
    if success:
        status.update({"completionTime": now, "uncountedTerminatedPods": {}})
    kubectl("-n", namespace, "patch", "job", name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))


def _converge(kube, namespace, name, rounds=3):
    for _ in range(rounds):
        reconcile(kube, _body(kube, namespace, name))


def test_create_gates_nodes_on_the_populate_job(kube, kubectl, crd_installed, namespace):
    _create(kubectl, namespace, "c1", nodeSets=[{"name": "worker", "replicas": 2}])
    result = reconcile(kube, _body(kube, namespace, "c1"))
    assert result.phase == "Populating"
    assert _names(kube, namespace, "Secret") == ["c1-jwt-key", "c1-munge-key", "c1-ssh-host-keys"]
    assert _names(kube, namespace, "ConfigMap") == ["c1-slurm-configs", "c1-sshd-config"]
    assert _names(kube, namespace, "Job", "batch/v1") == ["c1-populate-jail"]
    assert _names(kube, namespace, "StatefulSet", "apps/v1") == []
    uid = _body(kube, namespace, "c1")["metadata"]["uid"]
    job = kube.get("batch/v1", "Job", namespace, "c1-populate-jail")
    assert job["metadata"]["ownerReferences"][0]["uid"] == uid

    _finish_job(kubectl, namespace, "c1-populate-jail")
    result = reconcile(kube, _body(kube, namespace, "c1"))
    assert result.phase == "Provisioning"
    assert _names(kube, namespace, "StatefulSet", "apps/v1") == ["c1-controller", "c1-login", "c1-worker"]
    assert _names(kube, namespace, "Service") == ["c1-controller", "c1-login", "c1-login-headless", "c1-rest",
                                                  "c1-worker"]
    status = _body(kube, namespace, "c1")["status"]
    assert status["phase"] == "Provisioning" and status["workers"]["desired"] == 2
    assert status["nodeSets"] == [{"name": "worker", "desired": 2, "ready": 0}]
    # No controller ready yet: Slurm is not asked, and not reported as anything.
    assert {c["type"]: c["status"] for c in status["conditions"]}["SlurmReachable"] == "Unknown"
    assert "slurmNodes" not in status
    assert {c["type"]: c["status"] for c in status["conditions"]}["JailPopulated"] == "True"


# Besides the defaults, specs that render most of what the operator can: sub-mounts and local volumes
# (a false readOnly, which the apiserver leaves out, once made every pass write), GPUs, Pyxis, sizes
# and tolerations, names at their limits.
NOOP_SPECS = [None, ROOT / "examples" / "gpu-pyxis.yaml", GOOD_CRS[0].parent / "names-at-limits.yaml",
              GOOD_CRS[0].parent / "devices-tolerations-and-sizes.yaml"]


@pytest.mark.parametrize("path", NOOP_SPECS, ids=lambda p: p.stem if p else "defaults")
def test_noop_reconcile_makes_zero_writes(kube, kubectl, crd_installed, namespace, path):
    name = "c2"
    if path is None:
        _create(kubectl, namespace, name)
    else:
        doc = yaml.safe_load(path.read_text())
        name = doc["metadata"]["name"]
        # A fixed NodePort could meet the one an earlier test's Service got, its namespace still going.
        (doc["spec"].get("login", {}).get("service") or {}).pop("nodePort", None)
        kubectl("apply", "-f", "-", input=yaml.safe_dump({**doc, "metadata": {"name": name, "namespace": namespace}}))
    reconcile(kube, _body(kube, namespace, name))
    _finish_job(kubectl, namespace, f"{name}-populate-jail")
    _converge(kube, namespace, name)
    before = kube.writes
    result = reconcile(kube, _body(kube, namespace, name))
    assert kube.writes - before == 0
    # Not a gate that stopped the pass before it reached the StatefulSets.
    assert result.phase != "Error", result.conditions
    assert f"{name}-controller" in _names(kube, namespace, "StatefulSet", "apps/v1")


def test_an_idle_pass_reads_each_kind_once_whatever_the_node_sets(kube, kubectl, crd_installed, namespace):
    """One labelled list per kind of child, the key Secrets by name; nothing per node set, nothing twice."""
    calls = {}
    for name, node_sets in (("r1", 1), ("r5", 5)):
        _create(kubectl, namespace, name, nodeSets=[{"name": f"s{i}", "replicas": 1} for i in range(node_sets)])
        reconcile(kube, _body(kube, namespace, name))
        _finish_job(kubectl, namespace, f"{name}-populate-jail")
        _converge(kube, namespace, name)
        body, before = _body(kube, namespace, name), Counter(kube.calls)
        reconcile(kube, body)
        calls[node_sets] = Counter(kube.calls) - before
    assert calls[1] == calls[5]
    assert all(n == 1 for (verb, kind), n in calls[5].items() if verb == "list")
    assert set(calls[5]) == {("get", "Secret")} | {("list", kind) for kind in (
        "ConfigMap", "Service", "StatefulSet", "Job", "NetworkPolicy", "PodDisruptionBudget", "Pod")}


def test_render_prints_every_object_the_operator_creates(kube, kubectl, crd_installed, namespace, keys):
    """`soperator render --with-secrets` and the operator agree on every object, accounting included
    (slurmdbd.conf's Secret is named by a hash of its content, so only its prefix is compared)."""
    from soperator.api import parse_cluster
    from soperator.render import render_all

    _create(kubectl, namespace, "g1", nodeSets=[{"name": "cpu", "replicas": 1}, {"name": "gpu", "replicas": 1}],
            accounting={"enabled": True, "managed": {"claimName": "acct-db"}})
    reconcile(kube, _body(kube, namespace, "g1"))
    _finish_job(kubectl, namespace, "g1-populate-jail")
    _converge(kube, namespace, "g1")

    def named(kind, name):
        return (kind, "g1-slurmdbd-conf-*" if name.startswith("g1-slurmdbd-conf-") else name)

    created = {named(kind, name) for api, kind in (("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"),
                                                    ("apps/v1", "StatefulSet"), ("batch/v1", "Job"),
                                                    ("networking.k8s.io/v1", "NetworkPolicy"),
                                                    ("policy/v1", "PodDisruptionBudget"))
               for name in _names(kube, namespace, kind, api)}
    rendered = render_all(parse_cluster(_body(kube, namespace, "g1")), keys)
    assert {named(o["kind"], o["metadata"]["name"]) for o in rendered} == created
    assert ("StatefulSet", "g1-slurmdbd") in created and ("Secret", "g1-slurmdbd-conf-*") in created


def test_keys_are_never_regenerated(kube, api, kubectl, crd_installed, namespace):
    _create(kubectl, namespace, "c3")
    reconcile(kube, _body(kube, namespace, "c3"))
    munge = kube.get("v1", "Secret", namespace, "c3-munge-key")["data"]
    jwt_key = kube.get("v1", "Secret", namespace, "c3-jwt-key")["data"]
    ssh = kube.get("v1", "Secret", namespace, "c3-ssh-host-keys")["data"]
    restarted = Kube(api)  # a fresh operator process: no memory of the first
    _create(kubectl, namespace, "c3", nodeSets=[{"name": "worker", "replicas": 5}])
    _converge(restarted, namespace, "c3")
    assert kube.get("v1", "Secret", namespace, "c3-munge-key")["data"] == munge
    assert kube.get("v1", "Secret", namespace, "c3-ssh-host-keys")["data"] == ssh
    assert kube.get("v1", "Secret", namespace, "c3-jwt-key")["data"] == jwt_key


def test_scale_change_touches_only_what_it_must(kube, kubectl, crd_installed, namespace):
    _create(kubectl, namespace, "c4", nodeSets=[{"name": "worker", "replicas": 2}])
    reconcile(kube, _body(kube, namespace, "c4"))
    _finish_job(kubectl, namespace, "c4-populate-jail")
    _converge(kube, namespace, "c4")

    def versions():
        # A StatefulSet's generation counts changes to its spec; its resourceVersion also moves when the
        # controller writes its status, which may come late on a busy machine (seen in CI: c4-login).
        def version(meta: dict) -> str:
            return str(meta.get("generation") or meta["resourceVersion"])
        return {(k, n): version(kube.get(a, k, namespace, n)["metadata"]) for a, k, n in (
            ("apps/v1", "StatefulSet", "c4-login"), ("v1", "ConfigMap", "c4-sshd-config"),
            ("v1", "Service", "c4-login"), ("apps/v1", "StatefulSet", "c4-worker"),
            ("apps/v1", "StatefulSet", "c4-controller"), ("v1", "ConfigMap", "c4-slurm-configs"))}

    before = versions()
    login_hash = kube.get("apps/v1", "StatefulSet", namespace, "c4-login")["spec"]["template"]["metadata"]
    _create(kubectl, namespace, "c4", nodeSets=[{"name": "worker", "replicas": 3}])
    reconcile(kube, _body(kube, namespace, "c4"))
    after = versions()
    # Dynamic nodes: scaling is the worker StatefulSet's replica count, and nothing else.
    assert {k for k in before if before[k] != after[k]} == {("StatefulSet", "c4-worker")}
    worker = kube.get("apps/v1", "StatefulSet", namespace, "c4-worker")
    assert worker["spec"]["replicas"] == 3
    assert login_hash == kube.get("apps/v1", "StatefulSet", namespace, "c4-login")["spec"]["template"]["metadata"]


def test_a_field_the_spec_no_longer_sets_leaves_the_live_object(kube, kubectl, crd_installed, namespace):
    """Found on a running cluster: a worker kept /dev/fuse after its images were no longer mounted. Every
    field the operator rendered before and renders no more is taken out: a node selector, a resource
    limit; and a pass after that writes nothing again."""
    box = {"name": "box", "replicas": 1, "pyxis": {"enabled": True}}
    _create(kubectl, namespace, "c6", plugStack={"pyxis": {"mountImages": True}},
            nodeSets=[{**box, "scheduling": {"nodeSelector": {"disk": "ssd"}}}])
    reconcile(kube, _body(kube, namespace, "c6"))
    _finish_job(kubectl, namespace, "c6-populate-jail")
    _converge(kube, namespace, "c6")

    def pod_spec():
        return kube.get("apps/v1", "StatefulSet", namespace, "c6-box")["spec"]["template"]["spec"]
    assert pod_spec()["nodeSelector"] == {"disk": "ssd"}
    assert "soperator.dev/fuse" in pod_spec()["containers"][0]["resources"]["limits"]
    _create(kubectl, namespace, "c6", plugStack={"pyxis": {"mountImages": False}}, nodeSets=[box])
    reconcile(kube, _body(kube, namespace, "c6"))
    assert "nodeSelector" not in pod_spec()
    assert "soperator.dev/fuse" not in pod_spec()["containers"][0]["resources"]["limits"]
    before = kube.writes
    reconcile(kube, _body(kube, namespace, "c6"))
    assert kube.writes - before == 0


def test_a_changed_per_pod_volume_of_a_live_stateful_set_is_refused_and_changes_nothing(kube, kubectl,
                                                                                        crd_installed, namespace):
    """Found by review: a storage class set on a node set's local volume made every apply of its
    StatefulSet fail (Kubernetes refuses a change of volumeClaimTemplates) while the pass moved on. The
    pass is refused before any write, the field named; put back, the cluster converges as before. A
    size the apiserver keeps in another unit is the same size (2048Mi kept as 2Gi was written again
    on every pass before)."""
    scratch = {"name": "box", "replicas": 1, "localVolume": {"mountPath": "/scratch", "size": "1Gi"},
               "resources": {"limits": {"memory": "2048Mi", "cpu": "1000m"}}}
    _create(kubectl, namespace, "c8", nodeSets=[scratch])
    reconcile(kube, _body(kube, namespace, "c8"))
    _finish_job(kubectl, namespace, "c8-populate-jail")
    _converge(kube, namespace, "c8")
    configs = kube.get("v1", "ConfigMap", namespace, "c8-slurm-configs")["metadata"]["resourceVersion"]
    # generation, not resourceVersion: the StatefulSet controller writes its status when it likes
    sts = kube.get("apps/v1", "StatefulSet", namespace, "c8-box")["metadata"]["generation"]

    changed = {**scratch, "replicas": 2, "localVolume": {**scratch["localVolume"], "storageClassName": "fast"}}
    _create(kubectl, namespace, "c8", controller={"spool": {"size": "2Gi"}}, nodeSets=[changed])
    before = kube.writes
    assert reconcile(kube, _body(kube, namespace, "c8")).phase == "Error"
    assert kube.writes - before <= 2  # the status and the event only
    cond = {c["type"]: c for c in _body(kube, namespace, "c8")["status"]["conditions"]}["SpecValid"]
    assert (cond["status"], cond["reason"]) == ("False", "VolumeClaimChange"), cond
    spool, local, rest = cond["message"].split("; ")
    assert spool.startswith("spec.controller.spool: StatefulSet c8-controller keeps per-pod volume spool of 1Gi"), spool
    assert local.startswith("spec.nodeSets[0].localVolume: StatefulSet c8-box keeps per-pod volume local of 1Gi "
                            "(the default storage class)"), local
    assert "asks for per-pod volume local of 1Gi (storage class fast)" in local, local
    assert rest == "nothing was changed"
    assert kube.get("v1", "ConfigMap", namespace, "c8-slurm-configs")["metadata"]["resourceVersion"] == configs
    assert kube.get("apps/v1", "StatefulSet", namespace, "c8-box")["metadata"]["generation"] == sts
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "VolumeClaimChange" and e["involvedObject"]["name"] == "c8" for e in events)

    _create(kubectl, namespace, "c8", nodeSets=[{**scratch, "replicas": 2,
                                                 "localVolume": {**scratch["localVolume"], "size": "1024Mi"}}])
    reconcile(kube, _body(kube, namespace, "c8"))
    cond = {c["type"]: c for c in _body(kube, namespace, "c8")["status"]["conditions"]}["SpecValid"]
    assert cond["status"] == "True", cond
    assert kube.get("apps/v1", "StatefulSet", namespace, "c8-box")["spec"]["replicas"] == 2
    _converge(kube, namespace, "c8", rounds=1)
    before = kube.writes
    reconcile(kube, _body(kube, namespace, "c8"))
    assert kube.writes - before == 0


def test_a_node_set_named_worker_counts_its_own_pods_in_the_status(kube, kubectl, crd_installed, namespace):
    """Found on the quick start (whose node set is `worker`): its status showed every node set's pods."""
    _create(kubectl, namespace, "c7", nodeSets=[{"name": "worker", "replicas": 2}, {"name": "gpu", "replicas": 1}])
    reconcile(kube, _body(kube, namespace, "c7"))
    _finish_job(kubectl, namespace, "c7-populate-jail")
    _converge(kube, namespace, "c7")
    status = _body(kube, namespace, "c7")["status"]
    assert {s["name"]: s["desired"] for s in status["nodeSets"]} == {"worker": 2, "gpu": 1}
    assert status["workers"]["desired"] == 3


def test_bad_spec_sets_condition_and_event_and_creates_nothing(kube, kubectl, crd_installed, namespace):
    # Valid for the CRD schema, invalid for the models: a hostlist range that runs backwards.
    # The CRD cannot compare quantities: the default 4Gi limit stays under an 8Gi request.
    _create(kubectl, namespace, "bad", controller={"resources": {"requests": {"memory": "8Gi"}}})
    result = reconcile(kube, _body(kube, namespace, "bad"))
    assert result.phase == "Error"
    status = _body(kube, namespace, "bad")["status"]
    cond = [c for c in status["conditions"] if c["type"] == "SpecValid"][0]
    assert cond["status"] == "False" and "spec.controller.resources" in cond["message"]
    for kind, api in (("Secret", "v1"), ("ConfigMap", "v1"), ("Job", "batch/v1"), ("StatefulSet", "apps/v1")):
        assert _names(kube, namespace, kind, api) == []
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "InvalidSpec" and e["involvedObject"]["name"] == "bad" for e in events)
    before = kube.writes
    reconcile(kube, _body(kube, namespace, "bad"))
    assert kube.writes == before  # the same error is not re-posted


def test_failed_job_is_reported_not_retried(kube, kubectl, crd_installed, namespace):
    _create(kubectl, namespace, "c5")
    reconcile(kube, _body(kube, namespace, "c5"))
    uid = kube.get("batch/v1", "Job", namespace, "c5-populate-jail")["metadata"]["uid"]
    _finish_job(kubectl, namespace, "c5-populate-jail", success=False)
    result = reconcile(kube, _body(kube, namespace, "c5"))
    assert result.phase == "Error"
    cond = [c for c in _body(kube, namespace, "c5")["status"]["conditions"] if c["type"] == "JailPopulated"][0]
    assert cond["reason"] == "JobFailed" and "BackoffLimitExceeded" in cond["message"]
    before = kube.writes
    _converge(kube, namespace, "c5")
    assert kube.writes == before
    assert kube.get("batch/v1", "Job", namespace, "c5-populate-jail")["metadata"]["uid"] == uid
    assert _names(kube, namespace, "StatefulSet", "apps/v1") == []


def test_missing_user_secret_is_reported(kube, kubectl, crd_installed, namespace):
    _create(kubectl, namespace, "c6", secrets={"mungeKey": "site-munge"})
    result = reconcile(kube, _body(kube, namespace, "c6"))
    assert result.phase == "Error"
    cond = [c for c in result.conditions if c.type == "SecretsReady"][0]
    assert cond.reason == "SecretNotFound" and "site-munge" in cond.message
    assert _names(kube, namespace, "ConfigMap") == []


def test_a_key_secret_someone_else_made_first_is_not_trusted(kube, kubectl, crd_installed, namespace):
    """`c10-munge-key` planted before the cluster exists (by someone who may create Secrets): soperator
    neither uses nor touches it and says why (condition and event); nothing else is made. Named in
    spec.secrets, it is the admin's own key and used as it is."""
    planted = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c10-munge-key", "namespace": namespace},
               "data": {"munge.key": base64.b64encode(b"a key its planter knows" * 64).decode()}}
    kubectl("apply", "-f", "-", input=json.dumps(planted))
    _create(kubectl, namespace, "c10")
    result = reconcile(kube, _body(kube, namespace, "c10"))
    assert result.phase == "Error"
    cond = [c for c in result.conditions if c.type == "SecretsReady"][0]
    assert cond.reason == "SecretNotOurs" and "c10-munge-key" in cond.message and "spec.secrets" in cond.message
    assert kube.get("v1", "Secret", namespace, "c10-munge-key")["data"] == planted["data"]
    for kind, api in (("Secret", "v1"), ("ConfigMap", "v1"), ("StatefulSet", "apps/v1")):
        assert _names(kube, namespace, kind, api) == []
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "SecretNotOurs" and e["involvedObject"]["name"] == "c10" for e in events)

    _create(kubectl, namespace, "c10", secrets={"mungeKey": "c10-munge-key"})
    kubectl("-n", namespace, "label", "secret", "c10-munge-key", "slurm.soperator.dev/usable-by-clusters=true")
    result = reconcile(kube, _body(kube, namespace, "c10"))
    assert [c for c in result.conditions if c.type == "SecretsReady"][0].ok
    assert kube.get("v1", "Secret", namespace, "c10-munge-key")["data"] == planted["data"]


def test_a_named_secret_is_used_only_with_the_admins_label(kube, kubectl, crd_installed, namespace, monkeypatch):
    """Writing a SlurmCluster must not be a way to read any Secret of the namespace: one the spec names
    (keys, pull secrets, enroot credentials, a database password) is used only if the admin labelled it
    for Slurm clusters. Else: a condition and an event naming the field, and nothing made."""
    for name in ("site-munge", "site-jwt", "site-pull", "site-db", "site-enroot"):
        kubectl("-n", namespace, "create", "secret", "generic", name, "--from-literal=password=x",
                "--from-literal=munge.key=" + "k" * 64)
    spec = {"secrets": {"mungeKey": "site-munge", "jwtKey": "site-jwt"}, "images": {"pullSecrets": ["site-pull"]},
            "accounting": {"enabled": True, "external": {"host": "db.example", "passwordSecret": "site-db"}},
            "nodeSets": [{"name": "cpu"}, {"name": "gpu", "pyxis": {"enabled": True,
                                                                  "registryCredentialsSecret": "site-enroot"}}]}
    _create(kubectl, namespace, "c11", **spec)
    expected = [("spec.secrets.mungeKey", "site-munge"), ("spec.secrets.jwtKey", "site-jwt"),
                ("spec.accounting.external.passwordSecret", "site-db"), ("spec.images.pullSecrets[0]", "site-pull"),
                ("spec.nodeSets[1].pyxis.registryCredentialsSecret", "site-enroot")]
    for field, name in expected:
        result = reconcile(kube, _body(kube, namespace, "c11"))
        assert result.phase == "Error"
        cond = [c for c in result.conditions if c.type == "SecretsReady"][0]
        assert cond.reason == "SecretNotLabelled", cond
        assert cond.message.startswith(f"{field}: Secret {namespace}/{name} does not carry the label "
                                        "slurm.soperator.dev/usable-by-clusters=true"), cond.message
        for kind, api in (("Secret", "v1"), ("ConfigMap", "v1"), ("StatefulSet", "apps/v1"), ("Job", "batch/v1")):
            assert _names(kube, namespace, kind, api) == [], kind
        kubectl("-n", namespace, "label", "secret", name, "slurm.soperator.dev/usable-by-clusters=true")
    events = json.loads(kubectl("-n", namespace, "get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "SecretNotLabelled" and e["involvedObject"]["name"] == "c11" for e in events)
    result = reconcile(kube, _body(kube, namespace, "c11"))
    assert [c for c in result.conditions if c.type == "SecretsReady"][0].ok

    # A Secret soperator made for another cluster is that cluster's, not this one's: it needs the label.
    # (Owned by a real SlurmCluster: the garbage collector deletes one whose owner does not exist.)
    _create(kubectl, namespace, "other")
    other = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "other-munge", "namespace": namespace,
             "ownerReferences": [{"apiVersion": API, "kind": "SlurmCluster", "name": "other",
                                  "uid": _body(kube, namespace, "other")["metadata"]["uid"]}]},
             "data": {"munge.key": base64.b64encode(b"k" * 64).decode()}}
    kubectl("apply", "-f", "-", input=json.dumps(other))
    _create(kubectl, namespace, "c11", **{**spec, "secrets": {"mungeKey": "other-munge", "jwtKey": "site-jwt"}})
    cond = [c for c in reconcile(kube, _body(kube, namespace, "c11")).conditions if c.type == "SecretsReady"][0]
    assert cond.reason == "SecretNotLabelled" and cond.message.startswith("spec.secrets.mungeKey: Secret "), cond

    # The admin's own label (the operator chart's referencedSecretLabel); a missing pull secret is named.
    monkeypatch.setenv("SOPERATOR_SECRET_LABEL", "example.com/slurm=yes")
    cond = [c for c in reconcile(kube, _body(kube, namespace, "c11")).conditions if c.type == "SecretsReady"][0]
    assert cond.reason == "SecretNotLabelled" and "example.com/slurm=yes" in cond.message
    _create(kubectl, namespace, "c11", images={"pullSecrets": ["nowhere"]})
    cond = [c for c in reconcile(kube, _body(kube, namespace, "c11")).conditions if c.type == "SecretsReady"][0]
    assert cond.reason == "SecretNotFound" and cond.message.startswith("spec.images.pullSecrets[0]: Secret ")


def test_overwrite_of_a_live_cluster_holds_its_nodes_and_of_a_new_one_does_not(kube, kubectl, crd_installed,
                                                                               namespace):
    def containers(name):
        pod = kube.get("batch/v1", "Job", namespace, f"{name}-populate-jail")["spec"]["template"]["spec"]
        return [c["name"] for c in pod.get("initContainers", [])], [c["name"] for c in pod["containers"]]

    _create(kubectl, namespace, "fresh", populateJail={"overwrite": True})
    reconcile(kube, _body(kube, namespace, "fresh"))
    assert containers("fresh") == ([], ["populate-jail"])  # no nodes, no slurmctld: nothing to hold

    _create(kubectl, namespace, "live")
    reconcile(kube, _body(kube, namespace, "live"))
    _finish_job(kubectl, namespace, "live-populate-jail")
    _converge(kube, namespace, "live")
    assert "live-worker" in _names(kube, namespace, "StatefulSet", "apps/v1")
    _create(kubectl, namespace, "live", populateJail={"overwrite": True})
    for _ in range(20):  # the old Job goes (background deletion), then its successor comes
        result = reconcile(kube, _body(kube, namespace, "live"))
        job = kube.get("batch/v1", "Job", namespace, "live-populate-jail")
        if job and job["metadata"]["annotations"]["slurm.soperator.dev/overwrite"] == "true":
            break
    assert containers("live") == (["hold-nodes", "populate-jail"], ["release-nodes"])
    result = reconcile(kube, _body(kube, namespace, "live"))
    cond = [c for c in result.conditions if c.type == "JailPopulated"][0]
    assert "drains the Slurm nodes and waits for their jobs to end first" in cond.message, cond


def test_a_config_change_is_told_once_to_the_running_controller_pod(kube, kubectl, crd_installed, namespace):
    """The annotation that has the kubelet refresh the controller's ConfigMap files at once."""
    _create(kubectl, namespace, "c9")
    reconcile(kube, _body(kube, namespace, "c9"))
    _finish_job(kubectl, namespace, "c9-populate-jail")
    _converge(kube, namespace, "c9")
    until(lambda: kube.get("v1", "Pod", namespace, "c9-controller-0"), 60, "the controller pod")

    def seen() -> str | None:
        return (kube.get("v1", "Pod", namespace, "c9-controller-0")["metadata"].get("annotations") or {}).get(
            CONFIG_SEEN_ANNOTATION)
    reconcile(kube, _body(kube, namespace, "c9"))
    assert seen() is None  # not started: it will read the files as they are then
    # No kubelet here: the pod is marked running through its status, as the kubelet would.
    kubectl("-n", namespace, "patch", "pod", "c9-controller-0", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"phase": "Running"}}))
    reconcile(kube, _body(kube, namespace, "c9"))
    first = seen()
    assert first == configs_digest(kube.get("v1", "ConfigMap", namespace, "c9-slurm-configs"))
    before = kube.writes
    reconcile(kube, _body(kube, namespace, "c9"))
    assert kube.writes == before and seen() == first  # told once
    _create(kubectl, namespace, "c9", partitions=[{"name": "main", "default": True, "maxTime": "1:00:00"}])
    reconcile(kube, _body(kube, namespace, "c9"))
    assert seen() == configs_digest(kube.get("v1", "ConfigMap", namespace, "c9-slurm-configs")) != first


def test_each_cluster_keeps_one_slurm_client_until_its_key_or_uid_changes(kube, kubectl, crd_installed, namespace):
    """The kept client is what asks Slurm only for changes (update_time); a new key is a new client."""
    _create(kubectl, namespace, "c10")
    reconcile(kube, _body(kube, namespace, "c10"))  # makes the key Secrets
    clients, cluster = SlurmClients(), parse_cluster(_body(kube, namespace, "c10"))
    assert clients.connect(kube, cluster, False) == "the controller is not ready"
    first = clients.connect(kube, cluster, True)
    assert clients.connect(kube, cluster, True) is first
    secret = jwt_key_secret_name(cluster)  # immutable, as every key Secret: a new key is a new Secret
    kubectl("-n", namespace, "delete", "secret", secret)
    kubectl("-n", namespace, "create", "secret", "generic", secret, f"--from-literal={JWT_KEY_FILE}={'k' * 64}")
    second = clients.connect(kube, cluster, True)
    assert second is not first and clients.connect(kube, cluster, True) is second
    clients.forget(namespace, "c10")
    assert clients.connect(kube, cluster, True) is not second
    again = parse_cluster({**_body(kube, namespace, "c10"), "metadata": {
        **_body(kube, namespace, "c10")["metadata"], "uid": "another-cluster-same-name"}})
    assert clients.connect(kube, again, True) is not clients.connect(kube, cluster, True)
    # The demand poll asks only the clusters that autoscaled at their last pass.
    assert clients.elastic() == []
    body = _body(kube, namespace, "c10")
    elastic = parse_cluster({**body, "spec": {**body["spec"], "nodeSets": [{"name": "cpu", "autoscale": {"max": 2}}]}})
    kept = clients.connect(kube, elastic, True)
    assert clients.elastic() == [((namespace, "c10"), kept)]
    clients.connect(kube, cluster, True)
    assert clients.elastic() == []
    clients.connect(kube, elastic, True)
    clients.forget(namespace, "c10")
    assert clients.elastic() == []
