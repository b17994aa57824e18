"""spec.identity, without a directory: what validation refuses, what each node pod is given (sssd.conf
without the password, the Secrets, the state volume), what sshd and PAM are told, and how a node
composes sssd.conf from the ConfigMap and the bind Secret. The directory itself: tests/e2e/
test_identity_e2e.py (SSSD in our images) and tests/kube/test_directory_condition.py (the operator's look)."""
from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys

import pytest

from soperator.api import SpecError
from soperator.node import associations, identity as node_identity
from soperator.node.associations import login_users
from soperator.node.layout import IDENTITY_HASH_ANNOTATION, PATHS
from soperator.node.supervise import Supervisor
from soperator.render import render_all
from soperator.render.configs import sshd_files, sssd_conf
from tests.conftest import make_cluster

LDAP = {"uris": ["ldaps://ldap.example.org"], "searchBase": "dc=example,dc=org"}


def _objects(cluster, keys) -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): o for o in render_all(cluster, keys)}


@pytest.mark.parametrize("ldap, field, words", [
    ({**LDAP, "uris": ["ldap://ldap.example.org"]}, "uris", "needs startTls"),
    ({**LDAP, "uris": ["ldaps://a.example.org", "ldaps://a.example.org"]}, "uris", "listed twice"),
    ({**LDAP, "uris": ["ldaps://a.example.org,ldap://b.example.org"]}, "uris", "pattern"),
    ({**LDAP, "uris": ["https://a.example.org"]}, "uris", "pattern"),
    ({**LDAP, "uris": ["ldaps://a.example.org:70000"]}, "uris", "pattern"),
    ({**LDAP, "searchBase": "dc=example,\tdc=org"}, "searchBase", "pattern"),
    ({**LDAP, "searchBase": "dc=example\x00,dc=org"}, "searchBase", "pattern"),
    ({**LDAP, "searchBase": "dc=example,dc=org\nenumerate = true"}, "searchBase", "pattern"),
    ({**LDAP, "searchBase": "example.org"}, "searchBase", "pattern"),
    ({**LDAP, "userFilter": "(uid=a)(uid=b)"}, "userFilter", "one parenthesised filter"),
    ({**LDAP, "userFilter": "((uid=a)"}, "userFilter", "unbalanced"),
    ({**LDAP, "groupFilter": "(cn=a?)"}, "groupFilter", "pattern"),
    ({**LDAP, "bindSecret": "Ldap_Bind"}, "bindSecret", "pattern"),
    ({**LDAP, "egressCidrs": ["10.0.0.0/33"]}, "egressCidrs", ""),
])
def test_a_directory_sssd_cannot_take_safely_is_refused_naming_the_field(ldap, field, words):
    with pytest.raises(SpecError) as exc:
        make_cluster(identity={"ldap": ldap})
    assert f"spec.identity.ldap.{field}" in str(exc.value) and words in str(exc.value), str(exc.value)


def test_sssd_conf_names_the_directory_and_never_the_password(keys):
    cluster = make_cluster(identity={"ldap": {**LDAP, "uris": ["ldap://a.example.org:3389", "ldaps://b.example.org"],
                                              "startTls": True, "bindSecret": "ldap-bind", "caSecret": "ldap-ca",
                                              "userFilter": "(memberOf=cn=hpc,ou=groups,dc=example,dc=org)",
                                              "schema": "rfc2307bis"}, "cacheSeconds": 120})
    conf = sssd_conf(cluster)
    lines = {line.split(" = ", 1)[0]: line.split(" = ", 1)[1] for line in conf.splitlines() if " = " in line}
    assert lines["ldap_uri"] == "ldap://a.example.org:3389, ldaps://b.example.org"
    assert lines["ldap_id_use_start_tls"] == "true" and lines["ldap_tls_reqcert"] == "demand"
    assert lines["ldap_tls_cacert"] == PATHS.identity_ca and lines["ldap_schema"] == "rfc2307bis"
    assert lines["ldap_user_search_base"] == "dc=example,dc=org?subtree?(memberOf=cn=hpc,ou=groups,dc=example,dc=org)"
    assert lines["entry_cache_timeout"] == lines["memcache_timeout"] == "120"
    assert lines["ldap_enumeration_refresh_timeout"] == "60"  # at most a minute; only the controller lists
    assert lines["services"] == "nss, pam, ssh" and "enumerate" not in lines
    assert lines["core_dumpable"] == "false" and lines["override_homedir"] == "/home/%u"
    assert "authtok" not in conf and "bind_dn" not in conf
    objects = _objects(cluster, keys)
    assert objects[("ConfigMap", "demo-identity")]["data"]["sssd.conf"] == conf
    # A change to the directory's settings rolls every node pod (SSSD reads its file once).
    other = _objects(make_cluster(identity={"ldap": LDAP}), keys)
    for name in ("demo-controller", "demo-worker", "demo-login"):
        annotations = objects[("StatefulSet", name)]["spec"]["template"]["metadata"]["annotations"]
        assert annotations[IDENTITY_HASH_ANNOTATION] != \
            other[("StatefulSet", name)]["spec"]["template"]["metadata"]["annotations"][IDENTITY_HASH_ANNOTATION]


def test_each_slurm_node_pod_gets_sssd_and_nothing_changes_without_identity(keys):
    plain = _objects(make_cluster(), keys)
    with_identity = _objects(make_cluster(identity={"ldap": {**LDAP, "bindSecret": "ldap-bind"}}), keys)
    assert ("ConfigMap", "demo-identity") not in plain
    for name in ("demo-controller", "demo-worker", "demo-login"):
        pod = with_identity[("StatefulSet", name)]["spec"]["template"]["spec"]
        mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert mounts[PATHS.sss_state]["name"] == "sss-state" and "emptyDir" in volumes["sss-state"]
        assert mounts[PATHS.identity_bind_dir]["readOnly"]
        assert volumes["identity-bind"]["secret"] == {
            "secretName": "ldap-bind", "defaultMode": 0o400,
            "items": [{"key": "username", "path": "username"}, {"key": "password", "path": "password"}]}
        assert "identity-ca" not in volumes  # the image's public CAs
        bare = plain[("StatefulSet", name)]["spec"]["template"]
        assert not {"identity-conf", "sss-state"} & {v["name"] for v in bare["spec"]["volumes"]}
        assert IDENTITY_HASH_ANNOTATION not in bare["metadata"].get("annotations", {})
    # slurmdbd resolves no users: it gets none of it.
    accounted = _objects(make_cluster(identity={"ldap": LDAP}, accounting={"enabled": True}), keys)
    assert "sss-state" not in {v["name"] for v in accounted[("StatefulSet", "demo-slurmdbd")]["spec"]["template"]
                                                                                          ["spec"]["volumes"]}


def test_sshd_takes_directory_keys_and_pam_makes_homes_only_with_identity():
    plain = sshd_files(make_cluster())
    files = sshd_files(make_cluster(identity={"ldap": LDAP}))
    assert "AuthorizedKeysCommand" not in plain["sshd_config"] and "pam_mkhomedir" not in plain["pam_sshd"]
    # Root runs it: another user's process here would be a way into the container for root in the jail.
    assert f"AuthorizedKeysCommand {PATHS.directory_keys} %u\nAuthorizedKeysCommandUser root\n" in files["sshd_config"]
    # After the account step that enters the jail: the home is the jail's.
    pam = [line for line in files["pam_sshd"].splitlines() if line and not line.startswith("#")]
    assert pam.index("session  required pam_mkhomedir.so skel=/etc/skel umask=0077") > \
        max(i for i, line in enumerate(pam) if PATHS.pam_jail_module in line)


def test_the_directory_egress_is_opened_on_the_uris_ports_only(keys):
    cluster = make_cluster(identity={"ldap": {**LDAP, "uris": ["ldaps://a.example.org", "ldap://b.example.org:3389"],
                                              "startTls": True, "egressCidrs": ["10.1.2.0/24"]}})
    egress = _objects(cluster, keys)[("NetworkPolicy", "demo-node-egress")]["spec"]["egress"]
    assert egress[-1] == {"to": [{"ipBlock": {"cidr": "10.1.2.0/24"}}],
                          "ports": [{"protocol": "TCP", "port": 636}, {"protocol": "TCP", "port": 3389}]}
    assert len(_objects(make_cluster(identity={"ldap": LDAP}), keys)[("NetworkPolicy", "demo-node-egress")]
               ["spec"]["egress"]) == len(egress) - 1


@pytest.fixture
def bind_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(PATHS, "identity_bind_dir", str(tmp_path / "bind"))
    (tmp_path / "bind").mkdir()
    return tmp_path / "bind"


def test_the_node_adds_the_bind_credentials_and_the_controllers_enumeration(bind_dir):
    given = "[sssd]\ndomains = directory\n\n[domain/directory]\nid_provider = ldap\n"
    assert node_identity.sssd_conf(given, False) == given  # anonymous
    (bind_dir / "username").write_text("cn=reader,dc=example,dc=org\n")
    (bind_dir / "password").write_text("s3cret = with # odd chars")
    conf = node_identity.sssd_conf(given, True)
    assert conf == given + ("ldap_default_bind_dn = cn=reader,dc=example,dc=org\nldap_default_authtok_type = password\n"
                            "ldap_default_authtok = s3cret = with # odd chars\n" + node_identity.ENUMERATE)


@pytest.mark.parametrize("files, words", [
    ({"username": "cn=reader"}, "needs both"),
    ({"username": "cn=reader", "password": " padded"}, "one line"),
    ({"username": "cn=reader", "password": "two\nlines"}, "one line"),
    ({"username": "cn=reader", "password": ""}, "one line"),
])
def test_bind_credentials_sssd_conf_cannot_carry_are_refused(bind_dir, files, words):
    for name, text in files.items():
        (bind_dir / name).write_text(text)
    with pytest.raises(node_identity.IdentityError, match=words):
        node_identity.sssd_conf("[domain/directory]\n", False)


def test_sssd_conf_is_roots_alone_and_the_state_has_sssds_modes(tmp_path):
    path = tmp_path / "etc" / "sssd.conf"
    node_identity.write_private(str(path), "one\n")
    node_identity.write_private(str(path), "two\n")
    assert path.read_text() == "two\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    os.chmod(tmp_path, 0o777)  # as a kubelet makes an emptyDir
    node_identity.prepare_state(str(tmp_path / "sss"))
    modes = {sub: stat.S_IMODE((tmp_path / "sss" / sub).stat().st_mode) for sub, _ in node_identity.STATE_DIRS}
    assert modes == dict(node_identity.STATE_DIRS)


def test_a_rotated_bind_password_restarts_sssd_and_a_broken_one_keeps_it(tmp_path, bind_dir, monkeypatch):
    """The node's watch, with a stand-in daemon (the real SSSD restart runs in the e2e's images)."""
    given = tmp_path / "given.conf"
    given.write_text("[domain/directory]\n")
    monkeypatch.setattr(PATHS, "identity_conf_given", str(given))
    monkeypatch.setattr(PATHS, "sssd_conf", str(tmp_path / "sssd.conf"))
    (bind_dir / "username").write_text("cn=reader")
    (bind_dir / "password").write_text("one")
    sup = Supervisor()
    sup.procs["sssd"] = first = subprocess.Popen(["sleep", "600"])
    starts = []

    def start(s):
        starts.append(1)
        if len(starts) == 2:
            raise node_identity.IdentityError("sssd did not open its sockets")
        s.start("sssd", ["sleep", "600"])

    monkeypatch.setattr(node_identity, "_start", start)
    watch = node_identity.CredentialsWatch(sup, given.read_text(), node_identity.sssd_conf(given.read_text(), False),
                                           False)
    try:
        # A changed ConfigMap is not the watch's: the pods roll for it.
        given.write_text("[domain/directory]\nldap_tls_cacert = /nowhere\n")
        watch()
        assert sup.procs["sssd"] is first and not starts
        (bind_dir / "password").write_text("two")
        watch()
        assert first.returncode is not None and sup.procs["sssd"] is not first
        assert (tmp_path / "sssd.conf").read_text() == ("[domain/directory]\nldap_default_bind_dn = cn=reader\n"
                                                       "ldap_default_authtok_type = password\n"
                                                       "ldap_default_authtok = two\n")
        second = sup.procs["sssd"]
        (bind_dir / "password").write_text("")  # half-written: kept as it runs
        watch()
        assert sup.procs["sssd"] is second and second.poll() is None
        (bind_dir / "password").write_text("three")  # a restart that fails is logged, not raised
        watch()
        assert len(starts) == 2 and second.returncode is not None
    finally:
        for proc in sup.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_stale_sockets_are_cleared_before_sssd_starts(tmp_path):
    import socket

    pipes = tmp_path / "pipes"
    (pipes / "private").mkdir(parents=True)
    for path in (pipes / "nss", pipes / "private" / "sbus-monitor"):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
    (pipes / "keep").write_text("not a socket")
    node_identity.clear_sockets(str(pipes))
    assert sorted(p.name for p in pipes.rglob("*")) == ["keep", "private"]


def test_directory_keys_only_for_users_the_jail_does_not_have(tmp_path):
    """The AuthorizedKeysCommand's choice, run as sshd runs it (its exec replaced by echo)."""
    script = ("import sys; from soperator.node import directory_keys; from soperator.node.layout import PATHS; "
              "PATHS.sss_authorized_keys = '/bin/echo'; sys.exit(directory_keys.main(sys.argv[1:]))")
    local = subprocess.run([sys.executable, "-c", script, "root"], capture_output=True, text=True)
    directory = subprocess.run([sys.executable, "-c", script, "alice-of-the-directory"], capture_output=True,
                               text=True)
    assert (local.returncode, local.stdout) == (0, "")  # root is in /etc/passwd: no key from anywhere else
    assert (directory.returncode, directory.stdout) == (0, "alice-of-the-directory\n")


def test_accounting_takes_directory_users_of_any_regular_id(tmp_path, monkeypatch):
    """Local users as before (UID_MIN..UID_MAX of the jail's passwd); a directory's from UID_MIN up."""
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0::/root:/bin/bash\ncarol:x:1500:1500::/home/carol:/bin/bash\n"
                      "slurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\n")
    read_local = associations.local_names
    monkeypatch.setattr(associations, "local_names", lambda: read_local(str(passwd)))  # the jail's file
    entries = [pwd.struct_passwd((n, "*", u, u, "", "/", "/bin/sh")) for n, u in
               (("root", 0), ("carol", 1500), ("slurm", 64030), ("alice", 2001), ("dana", 1200000), ("sys", 999))]
    monkeypatch.setattr(pwd, "getpwall", lambda: entries)
    assert login_users() == ["alice", "carol", "dana"]
