"""The slurm-operator chart's admission policy on the real apiserver: what a SlurmCluster writer may
make the nodes run is held to the admin's lists (images, jail host paths, plugins, programs, the
control plane), each refusal naming the field; the operator's own metadata writes still go through."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.kube.test_helm_install import CHARTS, _helm
from tests.support.wait import until

pytestmark = pytest.mark.kube

ADMIN = {"admissionPolicy": {"jailHostPaths": ["/srv/jails"], "pluginPaths": ["/opt/site/spank"],
                             "programPaths": ["/opt/site/bin"], "seccompProfileDirs": ["site/seccomp"],
                             "healthCheckProgramPaths": ["/usr/sbin", "/opt/site/checks"], "allowRootSshKeys": False,
                             "allowNetworkPolicyOff": False, "directoryCidrs": ["10.20.0.0/16"],
                             "directoryPorts": ["636", "3269"]}}
ROOT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGv0tYcCWwmj1BbHDD9sD8ozkJWxAf3LGMSpqLcdsmeI admin"


def _cluster(namespace: str, name: str = "hpc", **spec) -> dict:
    return {"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _create(kubectl, body: dict, dry_run: bool = True):
    args = ["create", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    return kubectl(*args, input=json.dumps(body), check=False)


def _install(control_plane, tools, namespace: str, tmp_path, values: dict, action: str = "install") -> None:
    path = tmp_path / f"values-{action}.yaml"
    # An operator image that is never there: these tests are about the apiserver alone, and no operator
    # may act on the clusters they store.
    path.write_text(yaml.safe_dump({"image": {"repository": "localhost/soperator/not-started"}, **values}))
    _helm(control_plane, tools, action, "ops", str(CHARTS / "slurm-operator"), "-n", namespace,
          "--set", "crds.enabled=false", "--set", "seccompProfiles.install=false", "-f", str(path))


def _refused(kubectl, body: dict) -> str:
    proc = _create(kubectl, body)
    assert proc.returncode != 0, f"accepted: {json.dumps(body['spec'])}"
    return proc.stderr


def _policy_in_force(kubectl, namespace: str, body: dict) -> None:
    """The apiserver applies a new or changed policy a moment after it is stored."""
    until(lambda: _create(kubectl, body).returncode != 0, 60, "the admission policy to refuse a spec")
    name = f"ops-slurm-operator-{namespace}"
    until(lambda: _checked(kubectl, name), 60, "the policy's expressions to be type-checked")
    policy = json.loads(kubectl("get", "validatingadmissionpolicy", name, "-o", "json").stdout)
    assert not policy["status"].get("typeChecking", {}).get("expressionWarnings"), policy["status"]


def _checked(kubectl, name: str) -> bool:
    policy = json.loads(kubectl("get", "validatingadmissionpolicy", name, "-o", "json").stdout)
    return policy.get("status", {}).get("observedGeneration") == policy["metadata"]["generation"]


def test_a_writer_is_held_to_the_admins_lists(control_plane, tools, kubectl, crd_installed, namespace, tmp_path):
    _install(control_plane, tools, namespace, tmp_path, ADMIN)
    try:
        _policy_in_force(kubectl, namespace, _cluster(namespace, images={"registry": "evil.example.com/x"}))
        # The defaults (the registry the operator image comes from, a PVC jail) pass, and so do node
        # sets and components that leave out what the policy reads (no rule may fail on an absent field).
        for spec in ({}, {"nodeSets": [{"name": "gpu"}, {"name": "cpu", "scheduling": {}}]},
                     {"controller": {}, "login": {"scheduling": {"nodeSelector": {"pool": "login"}}},
                      "slurmConfig": {}, "plugStack": {}, "jail": {"volume": {}}}):
            proc = _create(kubectl, _cluster(namespace, **spec))
            assert proc.returncode == 0, (spec, proc.stderr)
        assert _create(kubectl, _cluster(namespace, images={"worker": "localhost/soperator/worker:2"})).returncode == 0

        # Images: each field named, with what it held.
        err = _refused(kubectl, _cluster(namespace, images={"registry": "evil.example.com/x"}))
        assert "spec.images.registry (evil.example.com/x): not from a registry the cluster admin allows " \
               "(localhost/soperator;" in err
        err = _refused(kubectl, _cluster(namespace, images={"login": "localhost/soperator-evil/login:1"}))
        assert "spec.images.login (localhost/soperator-evil/login:1)" in err  # a prefix is a whole path part
        err = _refused(kubectl, _cluster(namespace, nodeSets=[{"name": "gpu", "image": "docker.io/x/w:1"}]))
        assert "spec.nodeSets[gpu].image (docker.io/x/w:1)" in err

        # The jail on the node's disk: only under the admin's directories.
        for path in ("/var/lib/etcd", "/home", "/srv/jailsx", "/srv"):
            err = _refused(kubectl, _cluster(namespace, jail={"volume": {"hostPath": path}}))
            assert f"spec.jail.volume.hostPath ({path}): not under a node directory the cluster admin allows " \
                   "for jails (/srv/jails;" in err
        for path in ("/srv/jails", "/srv/jails/hpc"):
            assert _create(kubectl, _cluster(namespace, jail={"volume": {"hostPath": path}})).returncode == 0

        # The control plane: its taints tolerated, its label selected, or every taint tolerated.
        for scheduling in ({"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]},
                           {"tolerations": [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule",
                                             "operator": "Exists"}]},
                           {"tolerations": [{"operator": "Exists"}]},
                           {"tolerations": [{"key": "node-role.kubernetes.io/etcd", "operator": "Equal",
                                             "value": "true", "effect": "NoExecute"}]},
                           {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}},
                           {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                               "nodeSelectorTerms": [{"matchExpressions": [
                                   {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}]}}}},
                           {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                               {"weight": 1, "preference": {"matchExpressions": [
                                   {"key": "node-role.kubernetes.io/master", "operator": "Exists"}]}}]}}}):
            err = _refused(kubectl, _cluster(namespace, nodeSets=[{"name": "cpu", "scheduling": scheduling}]))
            assert "spec.nodeSets[cpu].scheduling: tolerates or selects the control-plane nodes" in err, scheduling
        err = _refused(kubectl, _cluster(namespace, controller={"scheduling": {
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}}))
        assert "spec.controller.scheduling: tolerates" in err
        gpu_taint = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                     "nodeSelector": {"pool": "gpu"}}
        assert _create(kubectl, _cluster(namespace, login={"scheduling": gpu_taint})).returncode == 0

        # SPANK plugins go into every job step's root slurmstepd: from the admin's directories only. (One in
        # a directory every user can write the CRD itself refuses, whatever the admin allows.)
        err = _refused(kubectl, _cluster(namespace, plugStack={"custom": ["required /tmp/evil.so"]}))
        assert "spec.plugStack.custom: Invalid value: custom lines may not load a plugin from a directory " \
               "every user can write" in err
        for line in ("required /srv/evil.so", "optional /opt/site/spank/../../../tmp/evil.so",
                     "required /opt/site/spankx/a.so arg", "required /opt/site/spank/.hidden/a.so"):
            err = _refused(kubectl, _cluster(namespace, plugStack={"custom": [line]}))
            assert f"spec.plugStack.custom loads {line.split()[1]} into every job step as root" in err
        assert _create(kubectl, _cluster(namespace, plugStack={
            "custom": ["required /opt/site/spank/x11.so arg=1"]})).returncode == 0

        # A Pyxis node set's workers with no syscall filter: only where the admin allows it.
        unconfined = {"name": "box", "pyxis": {"enabled": True, "seccompProfile": {"type": "Unconfined"}}}
        err = _refused(kubectl, _cluster(namespace, nodeSets=[{"name": "cpu"}, unconfined]))
        assert "spec.nodeSets[box].pyxis.seccompProfile: Unconfined runs the workers with no syscall filter" in err
        # ...nor under a profile of the nodes the admin did not choose (one may allow everything).
        foreign = {"name": "box", "pyxis": {"enabled": True, "seccompProfile": {"localhostProfile": "spo/any.json"}}}
        err = _refused(kubectl, _cluster(namespace, nodeSets=[foreign]))
        assert "spec.nodeSets[box].pyxis.seccompProfile.localhostProfile (spo/any.json): not in a directory of " \
               "seccomp profiles the cluster admin allows (soperator, site/seccomp;" in err
        for profile in ({"localhostProfile": "site/seccomp/enroot.json"}, {"localhostProfile": "soperator/x.json"},
                        {"type": "Localhost"}, {}):
            assert _create(kubectl, _cluster(namespace, nodeSets=[{"name": "box", "pyxis": {
                "enabled": True, "seccompProfile": profile}}])).returncode == 0, profile

        # Programs slurmd and slurmctld run as root or SlurmUser, and where plugins load from.
        for key, value in (("Prolog", "/tmp/p"), ("epilog", "/var/tmp/e"), ("RebootProgram", "/sbin/reboot"),
                           ("ResumeProgram", "/opt/site/bin/../../../tmp/r"), ("PluginDir", "/tmp/plugins"),
                           ("PluginDir", "/opt/site/spank:/tmp"), ("SlurmctldPrimaryOnProg", "/mnt/jail/tmp/x"),
                           # glob(3) expands Slurm's Prolog, and '.*' matches '..'
                           ("Prolog", "/opt/site/bin/.*/.*/.*/mnt/jail/tmp/p"), ("Epilog", "/opt/site/bin/e*")):
            err = _refused(kubectl, _cluster(namespace, slurmConfig={"extra": {key: value}}))
            assert f"spec.slurmConfig.extra.{key} ({value}): Slurm runs or loads it as root on the nodes" in err
        script = {"JobCompType": "jobcomp/script", "JobCompLoc": "/mnt/jail/home/alice/x"}
        err = _refused(kubectl, _cluster(namespace, slurmConfig={"extra": script}))
        assert "spec.slurmConfig.extra.JobCompLoc (/mnt/jail/home/alice/x): Slurm runs or loads it" in err
        assert _create(kubectl, _cluster(namespace, slurmConfig={"extra": {
            "Prolog": "/opt/site/bin/prolog.d/*", "PluginDir": "/opt/site/spank", "SchedulerParameters": "bf_continue",
            "TaskProlog": "/home/shared/task-prolog", "JobCompType": "jobcomp/filetxt",
            "JobCompLoc": "/var/log/slurm/jobcomp.txt"}})).returncode == 0

        # Ways a writer becomes root in the jail, or opens the nodes (#61): programs every worker runs as
        # root there, root's ssh keys, the network policy off, the directory's addresses and ports.
        for spec, named in (({"healthCheck": {"program": "/home/alice/nhc", "interval": 60}},
                             "spec.healthCheck.program (/home/alice/nhc)"),
                            ({"healthCheck": {"active": [{"name": "gpu", "program": "/opt/site/checksx/gpu",
                                                          "everySeconds": 600}]}},
                             "spec.healthCheck.active[gpu].program (/opt/site/checksx/gpu)"),
                            ({"healthCheck": {"program": "/usr/sbin/.hidden/x", "interval": 60}},
                             "spec.healthCheck.program (/usr/sbin/.hidden/x)"),
                            ({"healthCheck": {"program": "/usr/sbinx/nhc", "interval": 60}},
                             "spec.healthCheck.program (/usr/sbinx/nhc)")):
            err = _refused(kubectl, _cluster(namespace, **spec))
            assert f"{named}: every worker runs it as root in the jail; not under a jail directory the cluster " \
                   "admin allows (/usr/sbin, /opt/site/checks;" in err, err
        assert _create(kubectl, _cluster(namespace, healthCheck={"program": "/usr/sbin/nhc", "interval": 60, "active": [
            {"name": "gpu", "program": "/opt/site/checks/gpu", "everySeconds": 600}]})).returncode == 0
        err = _refused(kubectl, _cluster(namespace, login={"rootSshPublicKeys": [ROOT_KEY]}))
        assert "spec.login.rootSshPublicKeys: root logins to the login nodes, which the cluster admin does not " \
               "allow" in err
        err = _refused(kubectl, _cluster(namespace, networkPolicy={"enabled": False}))
        assert "spec.networkPolicy.enabled: false opens every address to the nodes" in err
        ldap = {"uris": ["ldap://10.20.0.7:3269", "ldaps://dir.example.org"], "startTls": True,
                "searchBase": "dc=example,dc=org", "egressCidrs": ["10.20.0.0/24", "10.30.0.0/16"]}
        err = _refused(kubectl, _cluster(namespace, identity={"ldap": ldap}))
        assert "spec.identity.ldap.egressCidrs (10.30.0.0/16): not within the ranges the cluster admin allows " \
               "a directory in (10.20.0.0/16;" in err, err
        err = _refused(kubectl, _cluster(namespace, identity={"ldap": {**ldap, "egressCidrs": ["10.20.0.0/24"],
                                                                        "uris": ["ldap://10.20.0.7", "ldaps://d:1636"]}}))
        assert "spec.identity.ldap.uris (ldap://10.20.0.7, ldaps://d:1636): not on a port the cluster admin " \
               "allows a directory on (636, 3269;" in err, err
        assert _create(kubectl, _cluster(namespace, identity={"ldap": {**ldap, "egressCidrs": ["10.20.0.0/24"]}})) \
            .returncode == 0

        # Another namespace answers to another release's lists, not this one's.
        assert _create(kubectl, _cluster("default", name="elsewhere", jail={"volume": {"hostPath": "/home"}})) \
            .returncode == 0
    finally:
        _helm(control_plane, tools, "uninstall", "ops", "-n", namespace)


def test_tightened_lists_bind_new_specs_not_the_operators_writes(control_plane, tools, kubectl, crd_installed,
                                                                 namespace, tmp_path):
    _install(control_plane, tools, namespace, tmp_path, ADMIN)
    try:
        _policy_in_force(kubectl, namespace, _cluster(namespace, images={"registry": "evil.example.com/x"}))
        digest = "@sha256:" + "b" * 64
        pinned = {c: f"localhost/soperator/{c.lower()}{digest}" for c in ("controller", "worker", "login", "populateJail")}
        stored = _cluster(namespace, images=pinned, jail={"volume": {"hostPath": "/srv/jails/hpc"}})
        assert _create(kubectl, stored, dry_run=False).returncode == 0

        # The admin requires digests, stops allowing host-path jails and allows Pyxis workers unconfined.
        _install(control_plane, tools, namespace, tmp_path, {"admissionPolicy": {
            "requireImageDigests": True, "allowUnconfinedSeccomp": True}}, action="upgrade")
        _policy_in_force(kubectl, namespace, _cluster(namespace, name="other"))
        err = _refused(kubectl, _cluster(namespace, name="other", images={
            "controller": "localhost/soperator/controller@sha256:" + "a" * 64, "worker": "localhost/soperator/w:1"}))
        assert "spec.images.worker, spec.images.login, spec.images.populateJail: the cluster admin requires " \
               "every image by digest" in err
        assert _create(kubectl, _cluster(namespace, name="other", images=pinned)).returncode == 0
        assert _create(kubectl, _cluster(namespace, name="other", images=pinned, nodeSets=[{"name": "box", "pyxis": {
            "enabled": True, "seccompProfile": {"type": "Unconfined"}}}])).returncode == 0
        err = _refused(kubectl, _cluster(namespace, name="other", images=pinned, accounting={"enabled": True}))
        assert "spec.images.database: the cluster admin requires every image by digest" in err

        # The stored cluster's metadata may still change (the operator's finalizer and annotations)…
        kubectl("-n", namespace, "annotate", "slurmcluster", "hpc", "kopf.zalando.org/touched=yes")
        kubectl("-n", namespace, "patch", "slurmcluster", "hpc", "--type=merge", "-p",
                '{"metadata": {"finalizers": ["slurm.soperator.dev/test"]}}')
        # …but a spec change is held to today's lists.
        proc = kubectl("-n", namespace, "patch", "slurmcluster", "hpc", "--type=merge", "-p",
                       '{"spec": {"maintenance": true}}', check=False)
        assert proc.returncode != 0 and "spec.jail.volume.hostPath (/srv/jails/hpc)" in proc.stderr
        kubectl("-n", namespace, "patch", "slurmcluster", "hpc", "--type=merge", "-p",
                '{"metadata": {"finalizers": null}}')
    finally:
        kubectl("-n", namespace, "delete", "slurmcluster", "--all", "--wait=false", check=False)
        _helm(control_plane, tools, "uninstall", "ops", "-n", namespace)


def test_user_namespaces_when_the_admin_requires_them(control_plane, tools, kubectl, crd_installed, namespace,
                                                      tmp_path):
    _install(control_plane, tools, namespace, tmp_path, {"admissionPolicy": {"requireUserNamespaces": True}})
    try:
        _policy_in_force(kubectl, namespace, _cluster(namespace))
        err = _refused(kubectl, _cluster(namespace, login={"hostUsers": False}, nodeSets=[
            {"name": "cpu", "hostUsers": False}, {"name": "gpu"}, {"name": "big", "hostUsers": True}]))
        assert "spec.nodeSets[gpu].hostUsers, spec.nodeSets[big].hostUsers: the cluster admin requires workers " \
               "and login nodes in a user namespace of their own" in err, err
        err = _refused(kubectl, _cluster(namespace, nodeSets=[{"name": "cpu", "hostUsers": False}]))
        assert "spec.login.hostUsers: the cluster admin requires" in err, err
        assert _create(kubectl, _cluster(namespace, login={"hostUsers": False}, nodeSets=[
            {"name": "cpu", "hostUsers": False}])).returncode == 0
    finally:
        _helm(control_plane, tools, "uninstall", "ops", "-n", namespace)
