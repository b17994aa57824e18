"""Directory users against local ones (spec.identity), on the e2e's real containers in one run.

  python -m bench.identity [--calls 5000] [--logins 10]

A controller, one worker and a login node with SSSD, a throwaway slapd (TLS) on the host side of the
cluster's network; alice lives in the directory, carol in the jail's own files. Figures:
  - getpwnam and initgroups (os.getgrouplist) in a job step, inside the jail, as alice: per call, for
    alice (nsswitch `files sss`: a miss in the files, then SSSD's memory cache) against carol (the
    files), and for alice with the memory cache off (SSS_NSS_USE_MEMCACHE=NO: SSSD's socket);
  - an ssh login (connect, key exchange, public key, a command, close) as alice (her key from the
    directory through sss_ssh_authorizedkeys) against carol (authorized_keys in her jail home),
    alternating.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path

import paramiko

from images.build import build_all
from images.podman import podman
from tests.cluster.controlplane import free_port
from tests.support.directory import User
from tests.support.directory_cluster import with_directory
from tests.support.e2e_cluster import SSH_PORT, add_user, ssh
from tests.support.ssh_session import run as ssh_run
from tests.support.wait import until

WORKER = "e2e-worker-0"
# Run in a job step as alice: seconds per call of each lookup, `calls` calls, 5 alternating blocks.
TIMER = """
import json, os, pwd, sys, time
calls = int(sys.argv[1])
lookups = {"getpwnam_directory": lambda: pwd.getpwnam("alice"), "getpwnam_files": lambda: pwd.getpwnam("carol"),
           "initgroups_directory": lambda: os.getgrouplist("alice", 3000),
           "initgroups_files": lambda: os.getgrouplist("carol", 1500)}
spent = dict.fromkeys(lookups, 0.0)
for _ in range(5):
    for name, call in lookups.items():
        started = time.perf_counter()
        for _ in range(calls // 5):
            call()
        spent[name] += time.perf_counter() - started
print(json.dumps({name: s / calls for name, s in spent.items()}))
"""


def _lookups(calls: int, memcache: bool) -> dict[str, float]:
    env = [] if memcache else ["--export=ALL,SSS_NSS_USE_MEMCACHE=NO"]
    proc = podman("exec", "e2e-login-0", "runuser", "-u", "alice", "--", "srun", "-w", WORKER, *env,
                  "python3", "-c", TIMER, str(calls), timeout=1800)
    return json.loads(proc.stdout)


def _login_s(port: int, user: str, key: paramiko.PKey) -> float:
    started = time.perf_counter()
    with ssh(port, user, key) as client:
        code, _, err = ssh_run(client, "true")
        assert code == 0, err
    return time.perf_counter() - started


def measure(port: int, keys: dict[str, paramiko.PKey], calls: int, logins: int) -> dict:
    cached = _lookups(calls, memcache=True)
    socket = _lookups(calls, memcache=False)
    for user, key in keys.items():  # first logins: alice's home made, both users' entries cached
        _login_s(port, user, key)
    seconds = {user: [] for user in keys}
    for _ in range(logins):
        for user, key in keys.items():
            seconds[user].append(_login_s(port, user, key))
    login = {user: statistics.median(s) for user, s in seconds.items()}
    us = lambda s: round(s * 1e6, 1)  # noqa: E731
    return {
        "calls": calls, "logins": logins,
        "getpwnam_us": {"directory": us(cached["getpwnam_directory"]), "files": us(cached["getpwnam_files"]),
                        "directory_no_memcache": us(socket["getpwnam_directory"])},
        "getpwnam_directory_vs_files": round(cached["getpwnam_directory"] / cached["getpwnam_files"], 2),
        "getpwnam_no_memcache_vs_files": round(socket["getpwnam_directory"] / cached["getpwnam_files"], 2),
        "initgroups_us": {"directory": us(cached["initgroups_directory"]), "files": us(cached["initgroups_files"]),
                          "directory_no_memcache": us(socket["initgroups_directory"])},
        "initgroups_directory_vs_files": round(cached["initgroups_directory"] / cached["initgroups_files"], 2),
        "login_s": {"directory_key": round(login["alice"], 3), "file_key": round(login["carol"], 3)},
        "login_directory_vs_file": round(login["alice"] / login["carol"], 2),
        "login_runs_s": {user: [round(x, 3) for x in s] for user, s in seconds.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--logins", type=int, default=10)
    args = parser.parse_args(argv)
    build_all()
    keys = {"alice": paramiko.RSAKey.generate(2048), "carol": paramiko.RSAKey.generate(2048)}
    with tempfile.TemporaryDirectory(prefix="soperator-bench-") as tmp:
        work = Path(tmp)
        with contextlib.contextmanager(with_directory)(work, 300, nodeSets=[{"name": "worker", "replicas": 1}]) \
                as (cluster, directory):
            cluster.populate("bench")
            directory.add_group("hpc", 3000, ["alice"])
            directory.add_user(User("alice", 2001, 3000, f"{keys['alice'].get_name()} {keys['alice'].get_base64()}"))
            add_user(cluster.jail, "carol", 1500, f"{keys['carol'].get_name()} {keys['carol'].get_base64()}")
            cluster.start("e2e-controller-0", cluster.pod("StatefulSet", "e2e-controller"))
            cluster.start(WORKER, cluster.pod("StatefulSet", "e2e-worker"))
            port = free_port()
            cluster.start("e2e-login-0", cluster.pod("StatefulSet", "e2e-login"), ["-p", f"127.0.0.1:{port}:{SSH_PORT}"])
            until(lambda: podman("exec", "e2e-controller-0", "sinfo", "-h", "-o", "%t", check=False).stdout.strip()
                  == "idle", 120, "the worker")
            until(lambda: podman("exec", "e2e-login-0", "getent", "passwd", "alice", check=False).returncode == 0,
                  120, "alice from the directory on the login node")
            result = measure(port, keys, args.calls, args.logins)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
