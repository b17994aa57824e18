"""The Helm charts with the real helm: lint, template, official schemas, our CRD, bad values."""
from __future__ import annotations

import json
import subprocess

import jsonschema
import pytest
import yaml

from soperator import generate
from soperator.api import parse_cluster
from soperator.api.crd import crd_yaml, values_schema_json
from soperator.api.paths import host_path_values_schema
from soperator.node.layout import REST_CLIENT_LABEL
from soperator.render.seccomp_profile import profile_file_name, profile_json
from tests.support_paths import ROOT
from tests.unit.test_crd import _as_json_schema, _schema
from tests.support import k8s_schema

CHARTS = ROOT / "charts"
CHART_NAMES = ["slurm-operator", "slurm-cluster", "slurm-cluster-storage"]
DIGEST = "sha256:" + "0" * 64
VALUE_VARIANTS = {
    "slurm-operator": [[], ["--set", "watchNamespaces={a,b}"], ["--set", "crds.enabled=false"],
                       ["--set", "admissionPolicy.enabled=false"], ["--set", f"image.digest={DIGEST}"],
                       ["--set", "admissionPolicy.imageRegistries={registry.example.com:5000/hpc,localhost}",
                        "--set", "admissionPolicy.programPaths={/opt/site/bin}"]],
    "slurm-cluster": [[], ["-f", str(CHARTS / "slurm-cluster" / "examples" / "gpu-pyxis.yaml")],
                      [x for c in ("controller", "worker", "login", "populateJail")
                       for x in ("--set", f"spec.images.{c}=registry.example.com/hpc/{c.lower()}@{DIGEST}")]],
    "slurm-cluster-storage": [[], ["--set", "controllerSpool.enabled=true", "--set", "subMounts[0].name=scratch",
                                   "--set", "subMounts[0].size=1Ti"],
                              ["--set", "jail.persistentVolume.enabled=true", "--set",
                               "jail.persistentVolume.nfs.server=nfs.example", "--set",
                               "jail.persistentVolume.nfs.path=/export/jail"],
                              ["--set", "accountingDatabase.enabled=true", "--set",
                               "accountingDatabase.persistentVolume.enabled=true", "--set",
                               "accountingDatabase.persistentVolume.hostPath=/srv/accounting-db"]],
}


def helm(tools, *args, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(tools["helm"]), *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: {proc.stderr}")
    return proc


def render(tools, chart: str, *args: str) -> list[dict]:
    out = helm(tools, "template", "demo", str(CHARTS / chart), "--namespace", "hpc", *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize("chart", CHART_NAMES)
def test_lint_strict(tools, chart):
    helm(tools, "lint", "--strict", str(CHARTS / chart))


@pytest.mark.parametrize("chart,args", [(c, a) for c in CHART_NAMES for a in VALUE_VARIANTS[c]])
def test_rendered_objects_are_valid(tools, chart, args):
    docs = render(tools, chart, *args)
    assert docs
    for doc in docs:
        if doc["kind"] == "SlurmCluster":
            jsonschema.validate(doc, _as_json_schema(_schema()))
            parse_cluster(doc)
            continue
        for version in ("1.31", "1.35"):
            k8s_schema.validate(doc, version)


# Each drift test names the one command that writes every generated file (soperator/generate.py).
FIX = f"drifted from the code: run `{generate.COMMAND}` from the repository's root"


def test_crd_in_chart_is_byte_identical_to_the_generated_one():
    assert (CHARTS / "slurm-operator" / "files" / "slurmclusters.slurm.soperator.dev.yaml").read_text() == crd_yaml(), \
        FIX
    assert (ROOT / "crds" / "slurmclusters.slurm.soperator.dev.yaml").read_text() == crd_yaml(), FIX


def test_storage_host_path_rule_is_the_models():
    schema = json.loads((CHARTS / "slurm-cluster-storage" / "values.schema.json").read_text())
    for volume in ("jail", "controllerSpool", "accountingDatabase"):
        pv = schema["properties"][volume]["properties"]["persistentVolume"]["properties"]
        assert pv["hostPath"] == host_path_values_schema(), f"{volume}: {FIX}"


def test_cluster_values_schema_is_generated_from_the_models():
    assert (CHARTS / "slurm-cluster" / "values.schema.json").read_text() == values_schema_json(), FIX


def test_chart_versions_follow_the_package():
    from soperator import __version__

    for chart in CHART_NAMES:
        meta = yaml.safe_load((CHARTS / chart / "Chart.yaml").read_text())
        assert meta["version"] == __version__ and meta["appVersion"] == __version__


@pytest.mark.parametrize("chart,args,message", [
    ("slurm-cluster", ["--set", "spec.nodeSets[0].name=a", "--set", "spec.nodeSets[0].replicas=-1"],
     "spec.nodeSets.0.replicas"),
    ("slurm-cluster", ["--set", "spec.workers.replicas=2"], "Additional property workers is not allowed"),
    ("slurm-cluster", ["--set", "spec.login.service.type=ExternalName"], "spec.login.service.type"),
    ("slurm-cluster", ["--set", "spec.nodeSets[0].name=a", "--set", "spec.nodeSets[0].sharedMemorySize=lots"],
     "spec.nodeSets.0.sharedMemorySize"),
    ("slurm-cluster", ["--set", "nameOverride=Bad_Name"], "nameOverride"),
    ("slurm-operator", ["--set", "image.pullPolicy=Sometimes"], "image.pullPolicy"),
    ("slurm-operator", ["--set", "metrics.auth=open"], "metrics.auth"),
    ("slurm-operator", ["--set", "image.digest=sha256:0123"], "image.digest"),
    *[("slurm-operator", ["--set", f"admissionPolicy.{key}={{{value}}}"], f"admissionPolicy.{key}")
      for key, value in (("jailHostPaths", "srv/jails"), ("jailHostPaths", "/srv/../etc"), ("pluginPaths", "/opt/"),
                         ("programPaths", "/opt/it's"), ("imageRegistries", "https://registry.example.com"),
                         ("imageRegistries", "Registry.example.com/x/"))],
    ("slurm-operator", ["--set", "referencedSecretLabel.key=a b"], "referencedSecretLabel.key"),
    ("slurm-operator", ["--set", "demandSeconds=0"], "demandSeconds"),
    *[("slurm-operator", ["--set", f"seccompProfiles.kubeletRootDir={path}"], "seccompProfiles.kubeletRootDir")
      for path in ("var/lib/kubelet", "/var/lib/../../etc", "/var/lib/kubelet/")],
    *[("slurm-operator", ["--set", f"fuseDevicePlugin.{key}={value}"], f"fuseDevicePlugin.{key}")
      for key, value in (("pluginDir", "var/lib/kubelet/device-plugins"), ("pluginDir", "/var/lib/../etc"),
                         ("devices", "0"), ("devices", "many"))],
    ("slurm-cluster-storage", ["--set", "jail.size=lots"], "jail.size"),
    ("slurm-cluster-storage", ["--set", "jail.persistentVolume.enabled=true"], "needs jail.persistentVolume.nfs"),
    *[("slurm-cluster-storage", ["--set", "jail.persistentVolume.enabled=true", "--set",
                                 f"jail.persistentVolume.hostPath={path}"], "jail.persistentVolume.hostPath")
      for path in ("/", "/srv/jail/../../etc", "/usr/local/jail", "/var", "/srv/jail/")],
])
def test_bad_values_fail_with_the_field_named(tools, chart, args, message):
    proc = helm(tools, "template", "demo", str(CHARTS / chart), *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_operator_rbac_is_namespaced_and_minimal(tools):
    docs = render(tools, "slurm-operator", "--set", "watchNamespaces={a,b}")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("Role") == 2
    # Cluster-wide: only the two review APIs (create-only, they read nothing), the /metrics reader, and
    # reading nodes (to follow cordons), which a value leaves out.
    cluster_rules = sorted((tuple(r.get("resources", r.get("nonResourceURLs"))), tuple(r["verbs"]))
                           for d in docs if d["kind"] == "ClusterRole" for r in d["rules"])
    assert cluster_rules == [(("/metrics",), ("get",)), (("nodes",), ("get", "list", "watch")),
                             (("subjectaccessreviews",), ("create",)), (("tokenreviews",), ("create",))]
    without = render(tools, "slurm-operator", "--set", "followKubernetesNodes=false")
    assert not [r for d in without if d["kind"] == "ClusterRole" for r in d["rules"] if "nodes" in r.get("resources", [])]
    # Moving workers off bad nodes: patch on nodes, and only when asked for.
    replacing = render(tools, "slurm-operator", "--set", "replaceUnhealthyWorkers=true")
    assert [r["verbs"] for d in replacing if d["kind"] == "ClusterRole" for r in d["rules"]
            if "nodes" in r.get("resources", [])] == [["get", "list", "watch", "patch"]]
    rules = [r for d in docs if d["kind"] == "Role" for r in d["rules"]]
    secrets = [r for r in rules if "secrets" in r["resources"]]
    assert {tuple(r["verbs"]) for r in secrets} == {("get", "create")}
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in rules)
    deploy = [d for d in docs if d["kind"] == "Deployment"][0]
    assert deploy["spec"]["strategy"]["type"] == "Recreate"
    assert "--namespace=a" in deploy["spec"]["template"]["spec"]["containers"][0]["args"]


def test_admission_policy_binds_the_watched_namespaces_and_can_be_left_out(tools):
    docs = {d["kind"]: d for d in render(tools, "slurm-operator", "--set", "watchNamespaces={a,b}")}
    binding = docs["ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["policyName"] == docs["ValidatingAdmissionPolicy"]["metadata"]["name"] == \
        "demo-slurm-operator-hpc"
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]
    assert binding["spec"]["validationActions"] == ["Deny"]
    kinds = {d["kind"] for d in render(tools, "slurm-operator", "--set", "admissionPolicy.enabled=false")}
    assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    env = {e["name"]: e.get("value") for e in docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SOPERATOR_SECRET_LABEL"] == "slurm.soperator.dev/usable-by-clusters=true"
    assert (env["SOPERATOR_RESYNC_SECONDS"], env["SOPERATOR_DEMAND_SECONDS"]) == ("60", "5")


def test_the_operators_pods_are_the_rest_clients_the_controllers_admit(tools):
    """The label the controller ingress policy admits to slurmrestd, and the namespace it names."""
    template = [d for d in render(tools, "slurm-operator") if d["kind"] == "Deployment"][0]["spec"]["template"]
    assert template["metadata"]["labels"][REST_CLIENT_LABEL] == "true"
    env = {e["name"]: e for e in template["spec"]["containers"][0]["env"]}
    assert env["SOPERATOR_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_seccomp_profiles_daemon_set_installs_the_shipped_profile_under_the_kubelet_root(tools):
    docs = render(tools, "slurm-operator", "--set", "seccompProfiles.kubeletRootDir=/srv/kubelet",
                  "--set", f"image.digest={DIGEST}")
    config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("seccomp-profiles"))
    assert config["data"] == {profile_file_name(): profile_json()}
    daemon = next(d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("seccomp-profiles"))
    pod = daemon["spec"]["template"]["spec"]
    assert {v["name"]: v.get("hostPath") for v in pod["volumes"]}["kubelet-seccomp"] == {
        "path": "/srv/kubelet/seccomp/soperator", "type": "DirectoryOrCreate"}
    container = pod["containers"][0]
    assert container["image"] == f"localhost/soperator/operator@{DIGEST}"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]} and pod["tolerations"] == [
        {"operator": "Exists"}]
    # The operator's Service and pod lookups select by its name label: these pods carry another.
    operator = next(d for d in docs if d["kind"] == "Service")["spec"]["selector"]
    assert not operator.items() <= daemon["spec"]["template"]["metadata"]["labels"].items()
    kinds = {(d["kind"], d["metadata"]["name"]) for d in render(tools, "slurm-operator",
                                                                  "--set", "seccompProfiles.install=false")}
    assert not [k for k in kinds if k[1].endswith("seccomp-profiles")]


def test_fuse_device_plugin_daemon_set_serves_the_kubelets_plugin_dir_unprivileged(tools):
    docs = render(tools, "slurm-operator", "--set", "fuseDevicePlugin.devices=8", "--set", f"image.digest={DIGEST}")
    daemon = next(d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("fuse-device-plugin"))
    pod = daemon["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"] == ["fuse-device-plugin", "--plugin-dir=/device-plugins", "--host-device=/host/dev/fuse",
                                 "--devices=8"]
    assert container["image"] == f"localhost/soperator/operator@{DIGEST}"
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert {v["name"]: v.get("hostPath") for v in pod["volumes"]} == {
        "device-plugins": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"},
        "host-dev": {"path": "/dev", "type": "Directory"}}
    assert {m["mountPath"]: m.get("readOnly", False) for m in container["volumeMounts"]} == {
        "/device-plugins": False, "/host/dev": True}
    assert pod["automountServiceAccountToken"] is False and not pod.get("hostNetwork")
    operator = next(d for d in docs if d["kind"] == "Service")["spec"]["selector"]
    assert not operator.items() <= daemon["spec"]["template"]["metadata"]["labels"].items()
    names = {d["metadata"]["name"] for d in render(tools, "slurm-operator", "--set", "fuseDevicePlugin.enabled=false")}
    assert not [n for n in names if n.endswith("fuse-device-plugin")]


def test_cgroup_delegate_is_off_by_default_and_holds_only_chown_when_on(tools):
    names = {d["metadata"]["name"] for d in render(tools, "slurm-operator")}
    assert not [n for n in names if "cgroup-delegate" in n]
    docs = render(tools, "slurm-operator", "--set", "cgroupDelegate.enabled=true")
    daemon = next(d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("cgroup-delegate"))
    pod = daemon["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"] == ["cgroup-delegate", "--node-name=$(NODE_NAME)", "--cgroup-root=/host/cgroup",
                                 "--proc-root=/proc"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}
    assert pod["hostPID"] is True and not pod.get("hostNetwork") and not container["securityContext"].get("privileged")
    assert pod["volumes"] == [{"name": "host-cgroup", "hostPath": {"path": "/sys/fs/cgroup", "type": "Directory"}},
                              {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("cgroup-delegate"))
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("cgroup-delegate"))
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    operator = next(d for d in docs if d["kind"] == "Service")["spec"]["selector"]
    assert not operator.items() <= daemon["spec"]["template"]["metadata"]["labels"].items()
    proc = helm(tools, "template", "demo", str(CHARTS / "slurm-operator"), "--set", "cgroupDelegate.enabled=yes",
                check=False)
    assert proc.returncode != 0 and "cgroupDelegate.enabled" in proc.stderr, proc.stderr


def test_images_by_digest(tools):
    """A digest pins what runs: no push to a tag changes it (security review #7)."""
    deploy = [d for d in render(tools, "slurm-operator", "--set", f"image.digest={DIGEST}")
              if d["kind"] == "Deployment"][0]
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == f"localhost/soperator/operator@{DIGEST}"
    pinned = [x for c in ("controller", "worker") for x in ("--set", f"spec.images.{c}=r.example.com/{c}@{DIGEST}")]
    cluster = [d for d in render(tools, "slurm-cluster", *pinned) if d["kind"] == "SlurmCluster"][0]
    assert cluster["spec"]["images"]["worker"] == f"r.example.com/worker@{DIGEST}"


def test_jail_claim_is_kept_on_uninstall(tools):
    claim = [d for d in render(tools, "slurm-cluster-storage") if d["kind"] == "PersistentVolumeClaim"][0]
    assert claim["metadata"]["name"] == "demo-jail"
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_service_monitor_only_where_its_crd_exists_and_the_dashboard_ships(tools):
    plain = render(tools, "slurm-operator")
    assert not [d for d in plain if d["kind"] == "ServiceMonitor"]
    docs = render(tools, "slurm-operator", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
                  "--set", "metrics.serviceMonitor.labels.release=prom")
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    (service,) = [d for d in docs if d["kind"] == "Service"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] and endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # the self-signed certificate
    signed = render(tools, "slurm-operator", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
                    "--set", "metrics.certSecret=metrics-tls")
    assert [d for d in signed if d["kind"] == "ServiceMonitor"][0]["spec"]["endpoints"][0]["tlsConfig"] == {
        "insecureSkipVerify": False}
    (dashboard,) = [d for d in plain if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["soperator-slurm.json"])["uid"] == "soperator-slurm"
