"""Run slurmctld with a rendered config inside private namespaces, then report what it serves.

Started by tests as PID 1 of new PID/UTS/mount/net namespaces (see `run_controller`), so the real
daemons see the paths and host name the rendered config names, talk only on a private loopback,
and die with the namespace. Prints one JSON document on stdout.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

MUNGE_SOCKET_DIR = "/run/munge"
# munged refuses key and seed paths under directories other users cannot traverse (pytest's 0700).
MUNGE_STATE_DIR = "/run/munge-state"
MUNGE_KEY = f"{MUNGE_STATE_DIR}/munge.key"


def sh(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def bind(source: str, target: str) -> None:
    sh("mount", "--bind", source, target)


def prepare(work: str, hostname: str, config_dir: str, spool_dir: str, munge_key: str) -> None:
    sh("ip", "link", "set", "lo", "up")
    # glibc (AI_ADDRCONFIG) resolves nothing on a host with loopback only; slurmctld then cannot bind.
    # A link-local address on a veth pair that never leaves this private namespace (no dummy driver).
    sh("ip", "link", "add", "sop0", "type", "veth", "peer", "name", "sop1")
    sh("ip", "addr", "add", "169.254.77.1/32", "dev", "sop0")
    sh("ip", "link", "set", "sop0", "up")
    sh("ip", "link", "set", "sop1", "up")
    sh("hostname", hostname)
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as fh:
        fh.write(f"127.0.0.1 localhost {hostname}\n")
    bind(hosts, "/etc/hosts")
    sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/var/spool")
    bind(config_dir, "/etc/slurm")
    os.makedirs(spool_dir)
    shutil.chown(spool_dir, "slurm", "slurm")
    for directory, mode in ((MUNGE_SOCKET_DIR, 0o755), (MUNGE_STATE_DIR, 0o700)):
        os.makedirs(directory, mode=mode)
        shutil.chown(directory, "munge", "munge")
    shutil.copyfile(munge_key, MUNGE_KEY)
    os.chmod(MUNGE_KEY, 0o400)
    shutil.chown(MUNGE_KEY, "munge", "munge")


def start_munged(work: str) -> subprocess.Popen:
    log = open(os.path.join(work, "munged.log"), "w")
    cmd = ["runuser", "-u", "munge", "--", "munged", "-F", "--key-file", MUNGE_KEY,
           "--log-file", "/dev/stderr", "--pid-file", f"{MUNGE_SOCKET_DIR}/munged.pid",
           "--seed-file", f"{MUNGE_STATE_DIR}/munged.seed"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    for _ in range(100):
        if os.path.exists(f"{MUNGE_SOCKET_DIR}/munge.socket.2"):
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError("munged did not start: " + open(log.name).read())


def wait_for_controller(proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
        if "is UP" in ping.stdout:
            return True
        time.sleep(0.2)
    return False


def query() -> dict:
    def out(*argv):
        return subprocess.run(argv, capture_output=True, text=True).stdout

    return {
        "sinfo": out("sinfo", "-h", "-o", "%R|%N"),
        "partitions": out("scontrol", "-o", "show", "partition"),
        "nodes": out("scontrol", "-o", "show", "node"),
        "config": out("scontrol", "show", "config"),
    }


def main() -> int:
    work, hostname, config_dir, munge_key = sys.argv[1:5]
    prepare(work, hostname, config_dir, "/var/spool/slurmctld", munge_key)
    munged = start_munged(work)
    log_path = os.path.join(work, "slurmctld.log")
    with open(log_path, "w") as log:
        ctld = subprocess.Popen(["slurmctld", "-D", "-i", "-f", "/etc/slurm/slurm.conf"], stdout=log,
                                stderr=log)
        up = wait_for_controller(ctld, timeout=30)
        result = {"up": up, **(query() if up else {})}
        for proc in (ctld, munged):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    result["exit_code"] = ctld.returncode
    result["log"] = open(log_path).read()[-4000:]
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
