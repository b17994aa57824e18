"""Directory users end to end (spec.identity): a real slapd speaking TLS (Debian's, with a CA of the
test's own) on the host side of the cluster's network, and the cluster's containers from our images,
configured only by `soperator render`. Users exist only in the directory: they ssh in with the key
kept there, get a home at the first login, run jobs, see group changes, survive the directory going
away, and lose access when removed; the controller's sync puts them in accounting, where sacct shows
their jobs. A local user of the jail keeps working beside them."""
from __future__ import annotations

import os
import time

import paramiko
import pytest

from images.podman import podman
from tests.cluster.controlplane import free_port
from tests.support.directory import READER_PASSWORD, User
from tests.support.directory_cluster import BIND_SECRET, start_accounting, with_directory
from tests.support.e2e_cluster import SSH_PORT, add_user, try_ssh
from tests.support.ssh_session import run as _run
from tests.support.wait import until

pytestmark = pytest.mark.e2e
# The shortest spec.identity.cacheSeconds: how long a change in the directory may take to show.
CACHE_SECONDS = 10
ROOT_KEY = paramiko.RSAKey.generate(2048)
# As root in the jail (a login session): SSSD's files are read-only there, its private sockets hidden,
# and no SSSD process can be followed into the node container through /proc/<pid>/root.
ROOT_CHECKS = ("touch /var/lib/sss/pipes/x 2>&1 | grep -c 'Read-only file system'; "
               "ls -A /var/lib/sss/pipes/private | wc -l; "
               "P=$(pgrep -d ' ' '^sssd'); echo $P | wc -w; "
               "for p in $P; do ls /proc/$p/root/ >/dev/null 2>&1 && echo open-$p; done; echo end")


def _key_line(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


@pytest.fixture
def directory_cluster(images, tmp_path):
    yield from with_directory(tmp_path, CACHE_SECONDS, nodeSets=[{"name": "worker", "replicas": 1}],
                              accounting={"enabled": True},
                              login={"rootSshPublicKeys": [f"{ROOT_KEY.get_name()} {ROOT_KEY.get_base64()}"]})


def _logs_in(port: int, user: str, key: paramiko.PKey) -> bool:
    client = try_ssh(port, user, key)
    if client is None:
        return False
    client.close()
    return True


def _rotate(cluster, password: str) -> None:
    """The bind Secret's new password, swapped into its volume as a kubelet updates a Secret."""
    path = cluster.store.root / "Secret" / BIND_SECRET / "password"
    tmp = path.with_name(".password.new")
    tmp.write_text(password)
    os.replace(tmp, path)


def _restarts(pod: str) -> int:
    return podman("logs", pod, check=False).stderr.count("the bind Secret changed; sssd restarted")


def _job(client, command: str) -> str:
    """A one-node batch job from the login session; its output once COMPLETED."""
    code, out, err = _run(client, f"sbatch --parsable -N1 -o ~/job-%j.out --wrap '{command}'")
    assert code == 0, err
    job = out.strip()

    def state():
        found = _run(client, f"scontrol -o show job {job} | grep -o 'JobState=[A-Z]*'")[1].strip()
        return found if found not in ("", "JobState=PENDING", "JobState=RUNNING", "JobState=CONFIGURING",
                                      "JobState=COMPLETING") else None

    assert until(state, 120, f"job {job}") == "JobState=COMPLETED"
    return _run(client, f"cat ~/job-{job}.out")[1]


def test_directory_users_log_in_run_jobs_and_survive_an_outage(directory_cluster):
    cluster, directory = directory_cluster
    assert cluster.populate("first")["action"] == "populated"
    alice_key, bob_key, carol_key, mallory_key = (paramiko.RSAKey.generate(2048) for _ in range(4))
    directory.add_group("hpc", 3000, ["alice"])
    directory.add_user(User("alice", 2001, 3000, _key_line(alice_key)))
    # A local user of the jail, as without a directory; the directory has a user of the same name,
    # whose key must not open the local account.
    add_user(cluster.jail, "carol", 1500, _key_line(carol_key))
    directory.add_user(User("carol", 2003, 3000, _key_line(mallory_key)))

    start_accounting(cluster)
    cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
    cluster.start("e2e-worker-0", cluster.pod("StatefulSet", "e2e-worker"))
    port = free_port()
    cluster.start("e2e-login-0", cluster.pod("StatefulSet", "e2e-login"), ["-p", f"127.0.0.1:{port}:{SSH_PORT}"])
    until(lambda: podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t", check=False).stdout.split()
          == ["idle"], 120, "the worker to register")

    # The controller's sync puts alice in accounting (slurm.conf enforces associations) with no
    # sacctmgr by hand: it lists her through SSSD.
    until(lambda: podman("exec", "e2e-controller-0", "sacctmgr", "-n", "-P", "list", "associations", "user=alice",
                         "format=account", check=False).stdout.split() == ["users"], 120, "alice's association")
    # alice exists only in the directory: her key is read from it, her home made at her first login.
    assert not (cluster.jail / "home" / "alice").exists()
    client = until(lambda: try_ssh(port, "alice", alice_key), 60, "alice's login with her directory key")
    with client:
        assert _run(client, "id")[1].strip() == "uid=2001(alice) gid=3000(hpc) groups=3000(hpc)"
        assert _run(client, "stat -c '%u %g %a' ~ && pwd")[1].split() == ["2001", "3000", "700", "/home/alice"]
        out = _job(client, "id -un; id -gn; getent passwd alice | cut -d: -f3,6; cat /etc/soperator-jail-release")
        lines = out.splitlines()
        assert lines[:3] == ["alice", "hpc", "2001:/home/alice"] and lines[3].startswith("soperator jail"), out
        assert until(lambda: _run(client, "sacct -n -X -P -o User,Account,State")[1].split(), 60,
                     "the job's record") == ["alice|users|COMPLETED"]
    home = (cluster.jail / "home" / "alice").stat()
    assert (home.st_uid, home.st_gid, home.st_mode & 0o777) == (2001, 3000, 0o700)
    assert not _logs_in(port, "carol", mallory_key)
    with until(lambda: try_ssh(port, "root", ROOT_KEY), 30, "root's login") as client:
        out = _run(client, ROOT_CHECKS)[1].split()
        assert out[:2] == ["1", "0"] and int(out[2]) >= 4 and out[3:] == ["end"], out

    # A user added to the directory now can log in; a group change shows within the cache time ...
    directory.add_user(User("bob", 2002, 3000, _key_line(bob_key)))
    directory.add_group("gpu", 3001, [])
    directory.add_member("gpu", "alice")
    started_at = time.monotonic()
    until(lambda: _logs_in(port, "bob", bob_key), CACHE_SECONDS + 60, "bob's login after he was added")
    seen = {"bob's login": time.monotonic() - started_at}

    def groups_of_alice():
        client = try_ssh(port, "alice", alice_key)
        if client is None:
            return None
        with client:
            return "gpu" in _run(client, "id -Gn")[1].split()

    until(groups_of_alice, CACHE_SECONDS + 60, "alice's new group")
    seen["alice's new group"] = time.monotonic() - started_at
    # ... and bob runs a job once the controller's sync has listed him (enumeration every cacheSeconds).
    with until(lambda: try_ssh(port, "bob", bob_key), 30, "bob's session") as client:
        until(lambda: _run(client, "sacctmgr -n -P list associations user=bob format=account")[1].split()
              == ["users"], CACHE_SECONDS + 120, "bob's association")
        seen["bob's association"] = time.monotonic() - started_at
        assert _job(client, "id -un; pwd").split() == ["bob", "/home/bob"]
    print("seconds after the directory changed: " + ", ".join(f"{k} {v:.0f}" for k, v in seen.items()))

    # The bind Secret rotated to a wrong password: each node's watch restarts SSSD with it (no new pod);
    # SSSD cannot bind, so dave, added to the directory now, does not exist for it, while alice, seen
    # before, keeps logging in and running jobs once her entries are past their time. The right
    # password back: dave logs in.
    dave_key = paramiko.RSAKey.generate(2048)
    directory.add_user(User("dave", 2004, 3000, _key_line(dave_key)))
    for restarts, password in ((1, "not-the-password"), (2, READER_PASSWORD)):
        _rotate(cluster, password)
        until(lambda: all(_restarts(pod) >= restarts for pod in ("e2e-login-0", "e2e-worker-0")), 90,
              f"sssd restarted with bind password {restarts}")
        if restarts == 1:
            time.sleep(CACHE_SECONDS + 2)
            assert not _logs_in(port, "dave", dave_key)
            with until(lambda: try_ssh(port, "alice", alice_key), 60, "alice's login") as client:
                assert _job(client, "id -un").split() == ["alice"]
    until(lambda: _logs_in(port, "dave", dave_key), CACHE_SECONDS + 60, "dave's login with the right password")

    # The directory goes away: users already seen keep logging in and running jobs, from SSSD's cache.
    directory.stop()
    time.sleep(CACHE_SECONDS + 5)  # past the entries' lifetime: served as expired, offline
    with until(lambda: try_ssh(port, "alice", alice_key), 30, "alice's login while the directory is away") as client:
        assert _job(client, "id -un").split() == ["alice"]
    # The local user is never the directory's business.
    with until(lambda: try_ssh(port, "carol", carol_key), 30, "carol's login") as client:
        assert _run(client, "id -un")[1].strip() == "carol"

    # Back, the directory removes alice: she loses access within the cache time.
    directory.start()
    directory.remove_user("alice")
    until(lambda: not _logs_in(port, "alice", alice_key), CACHE_SECONDS + 90, "alice to lose access")
    # ... and from the node's and the jail's lookups (SSSD's memory cache lives as long as its entries).
    until(lambda: podman("exec", "e2e-login-0", "getent", "passwd", "alice", check=False).returncode == 2,
          CACHE_SECONDS + 30, "alice to be gone from the login node")
    until(lambda: podman("exec", "e2e-worker-0", "chroot", "/mnt/jail", "getent", "passwd", "alice",
                         check=False).returncode == 2, CACHE_SECONDS + 30, "alice to be gone from the jail")
