"""A Slurm node in a box: slurmctld (and optionally one slurmd with the jail plugin) with rendered configs.

Runs inside a container of our own node image (see tests.support.slurm.SlurmSandbox), so the Slurm
is the one the product ships (Debian forky's 26.05) and the plugin is the one built for it: the real
daemons see the paths and host names the rendered config names, talk only on a private network
namespace, and die with the container. Protocol on stdin/stdout, one JSON document per line: the
sandbox prints {"ready": ...} once, then answers each {"run": [...]} with {"rc", "out", "err"}; it
stops everything when stdin closes. It runs with the image's Python and its copy of soperator_node.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

from soperator_node.database import ensure_account, prepare_datadir, server_argv
from soperator_node.layout import PATHS
from soperator_node.mounts import WORKER, bind, bind_into_jail
from soperator_node.roles import install_key

MUNGE_SOCKET_DIR = "/run/munge"
# munged refuses key and seed paths under directories other users cannot traverse (pytest's 0700).
MUNGE_STATE_DIR = "/run/munge-state"
MUNGE_KEY = f"{MUNGE_STATE_DIR}/munge.key"


def sh(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")


def network(hostname: str, names: list[str]) -> None:
    sh("ip", "link", "set", "lo", "up")
    # glibc (AI_ADDRCONFIG) resolves nothing on a host with loopback only; slurmctld then cannot bind.
    # A link-local address on a veth pair that never leaves this private namespace (no dummy driver).
    sh("ip", "link", "add", "sop0", "type", "veth", "peer", "name", "sop1")
    sh("ip", "addr", "add", "169.254.77.1/32", "dev", "sop0")
    sh("ip", "link", "set", "sop0", "up")
    sh("ip", "link", "set", "sop1", "up")
    sh("hostname", hostname)


def filesystem(work: str, spec: dict) -> None:
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as fh:
        fh.write("127.0.0.1 localhost " + " ".join(spec["names"]) + "\n")
    sh("mount", "--bind", hosts, "/etc/hosts")
    for target in ("/run", "/var/spool", "/var/log"):
        sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", target)
    sh("mount", "--bind", spec["config_dir"], "/etc/slurm")
    os.makedirs("/var/spool/slurmctld")
    shutil.chown("/var/spool/slurmctld", "slurm", "slurm")
    os.makedirs("/var/spool/slurmd")
    os.makedirs(os.path.dirname(spec["slurmd_log"]))
    sh("mount", "--bind", work, os.path.dirname(spec["slurmd_log"]))
    if spec.get("jail") is not None:
        sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/mnt")
        os.makedirs(spec["jail_mount"])
        if os.path.isdir(spec["jail"]):
            sh("mount", "--bind", spec["jail"], spec["jail_mount"])
    for directory, mode in ((MUNGE_SOCKET_DIR, 0o755), (MUNGE_STATE_DIR, 0o700)):
        os.makedirs(directory, mode=mode)
        shutil.chown(directory, "munge", "munge")
    shutil.copyfile(spec["munge_key"], MUNGE_KEY)
    os.chmod(MUNGE_KEY, 0o400)
    shutil.chown(MUNGE_KEY, "munge", "munge")
    if spec.get("jwt_key"):
        install_key(spec["jwt_key"], PATHS.jwt_key, "slurm")


def start(work: str, name: str, argv: list[str]) -> subprocess.Popen:
    log = open(os.path.join(work, f"{name}.log"), "w")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def wait(proc: subprocess.Popen, ready, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready():
            return True
        time.sleep(0.1)
    return False


def output(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True).stdout


def prepare_jail(jail: str) -> None:
    """What the worker entrypoint does in a pod: the image's /usr (thin jail) and the node binds."""
    if os.path.isdir(os.path.join(jail, "usr")) and not os.listdir(os.path.join(jail, "usr")):
        bind("/usr", os.path.join(jail, "usr"), read_only=True)
    bind_into_jail(jail, WORKER)


def boot(work: str, spec: dict) -> tuple[dict, list[subprocess.Popen]]:
    network(spec["hostname"], spec["names"])
    filesystem(work, spec)
    procs = []
    munged = start(work, "munged", ["runuser", "-u", "munge", "--", "munged", "-F", "--key-file", MUNGE_KEY,
                                    "--log-file", "/dev/stderr", "--pid-file", f"{MUNGE_SOCKET_DIR}/munged.pid",
                                    "--seed-file", f"{MUNGE_STATE_DIR}/munged.seed"])
    procs.append(munged)
    if not wait(munged, lambda: os.path.exists(f"{MUNGE_SOCKET_DIR}/munge.socket.2"), 10):
        return {"ready": False, "failed": "munged"}, procs
    if spec.get("accounting"):
        failed = start_accounting(work, spec["accounting"], procs)
        if failed:
            return {"ready": False, "failed": failed}, procs
    ctld = start(work, "slurmctld", ["slurmctld", "-D", "-i", "-f", "/etc/slurm/slurm.conf"])
    procs.append(ctld)
    if not wait(ctld, lambda: "is UP" in output("scontrol", "ping"), 30):
        return {"ready": False, "failed": "slurmctld", "exit_code": ctld.poll()}, procs
    if spec.get("rest_socket"):
        # As in the controller pod: nobody, JWT callers only; here on a socket the host can reach.
        rest = start(work, "slurmrestd", ["runuser", "-u", "nobody", "--", "env", "SLURM_JWT=daemon", "slurmrestd", "-a", "rest_auth/jwt",
                                          "-s", "openapi/slurmctld", f"unix:{spec['rest_socket']}"])
        procs.append(rest)
        if not wait(rest, lambda: os.path.exists(spec["rest_socket"]), 30):
            return {"ready": False, "failed": "slurmrestd", "exit_code": rest.poll()}, procs
    if spec.get("ctld_socket"):
        relay_to_port(spec["ctld_socket"], 6817)
    node = spec.get("slurmd")
    if spec.get("cloud") and spec.get("prepare_jail"):
        prepare_jail(spec["jail_mount"])  # for the slurmd the test starts as a CLOUD node's pod would
    if node:
        if spec.get("prepare_jail"):
            prepare_jail(spec["jail_mount"])
        # A dynamic node, configless, as a worker pod starts it (soperator/node/roles.py).
        slurmd = start(work, "slurmd-console", ["slurmd", "-D", "-Z", "--conf-server", f"{spec['hostname']}:6817",
                                                "--conf", spec["node_conf"], "-N", node])
        procs.append(slurmd)
        if not wait(slurmd, lambda: output("sinfo", "-h", "-n", node, "-o", "%t").strip() == "idle", 30):
            return {"ready": False, "failed": "slurmd", "exit_code": slurmd.poll()}, procs
    return {"ready": True}, procs


def netns_slurmd(work: str, name: str, index: int, node_conf: str) -> None:
    """One more dynamic node, as a worker pod on another machine runs it: its own network namespace
    (a veth pair to this one, 10.77.<index>.2 there, 10.77.<index>.1 here), its own /run, spool and
    host name, the controller's name resolving to this side of the pair. Slurm has one slurmd port,
    so a second slurmd needs an address of its own. It lives as long as the sandbox."""
    with open(os.path.join(work, "spec.json")) as fh:
        spec = json.load(fh)
    here, there, netns, veth = f"10.77.{index}.1", f"10.77.{index}.2", f"sop-n{index}", f"sopn{index}"
    sh("ip", "netns", "add", netns)
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
    sh("ip", "link", "set", f"{veth}p", "netns", netns)
    sh("ip", "addr", "add", f"{here}/32", "dev", veth)
    sh("ip", "link", "set", veth, "up")
    sh("ip", "route", "add", f"{there}/32", "dev", veth)
    inside = ("ip", "netns", "exec", netns)
    for argv in (("ip", "link", "set", "lo", "up"), ("ip", "addr", "add", f"{there}/32", "dev", f"{veth}p"),
                 ("ip", "link", "set", f"{veth}p", "up"), ("ip", "route", "add", f"{here}/32", "dev", f"{veth}p")):
        sh(*inside, *argv)
    hosts = os.path.join(work, f"hosts-{name}")
    with open(hosts, "w") as fh:
        fh.write(f"127.0.0.1 localhost\n{there} {name}\n{here} {spec['hostname']}\n")
    # munged's socket goes with it: /run is made anew on top.
    setup = (f"mkdir -p /mnt/{netns} && mount --bind {MUNGE_SOCKET_DIR} /mnt/{netns} && "
             f"mount -t tmpfs tmpfs /run && mkdir -p {MUNGE_SOCKET_DIR} && mount --bind /mnt/{netns} {MUNGE_SOCKET_DIR} && "
             f"mount -t tmpfs tmpfs /var/spool/slurmd && mount --bind {hosts} /etc/hosts && hostname {name} && "
             f"{_own_files_in_jail(spec)}"
             f"exec slurmd -b -Z --conf-server {here}:6817 --conf '{node_conf} NodeAddr={there}' -N {name}")
    sh(*inside, "unshare", "-m", "-u", "--propagation", "private", "sh", "-c", setup)


def _own_files_in_jail(spec: dict) -> str:
    """Shell that shows this slurmd's own hosts file and spool in the jail, as each worker pod's are, in
    place of the sandbox slurmd's: its slurmstepd, once in the jail, finds slurmctld by that hosts file
    (here at this namespace's end of the pair, not at 127.0.0.1) and its batch script in that spool."""
    jail = spec["jail_mount"]
    if not (spec.get("jail") and spec.get("prepare_jail") and os.path.ismount(jail + PATHS.worker_spool)):
        return ""
    own = 'tuple(b for b in WORKER if b.path == "/etc/hosts" or b.path.startswith(PATHS.worker_spool))'
    return (f"umount {jail}/etc/hosts && umount -R {jail}{PATHS.worker_spool} && python3 -c 'import sys; "
            f"from soperator_node.mounts import WORKER, bind_into_jail; from soperator_node.layout import PATHS; "
            f"bind_into_jail(sys.argv[1], {own})' {jail} && ")


def relay_to_port(path: str, port: int) -> None:
    """A unix socket at `path` (where the host reaches it) relaying each connection to loopback:`port`
    of this private network namespace, e.g. slurmctld's own HTTP server (metrics)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)

    def copy(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the other side went away: the connection is over

    def accept() -> None:
        while True:
            client, _ = server.accept()
            try:
                upstream = socket.create_connection(("127.0.0.1", port))
            except OSError:
                client.close()  # nothing listening there: the caller sees the connection close
                continue
            threading.Thread(target=copy, args=(client, upstream), daemon=True).start()
            threading.Thread(target=copy, args=(upstream, client), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()


def start_accounting(work: str, accounting: dict, procs: list) -> str | None:
    """MariaDB (the database image's helpers, data kept under `work`) and slurmdbd, as the accounting
    pods run them; the name of what failed, or None."""
    data = os.path.join(work, "mysql")
    prepare_datadir(data)
    mariadb = start(work, "mariadbd", server_argv(data, bind="127.0.0.1"))
    procs.append(mariadb)
    if not wait(mariadb, lambda: os.path.exists(PATHS.db_socket), 60):
        return "mariadbd"
    ensure_account(accounting["database"], accounting["user"], accounting["password"])
    conf = "/etc/slurm/slurmdbd.conf"  # slurmdbd refuses a file others may read
    shutil.chown(conf, "slurm", "slurm")
    os.chmod(conf, 0o600)
    os.makedirs("/run/slurmdbd", exist_ok=True)
    shutil.chown("/run/slurmdbd", "slurm", "slurm")
    slurmdbd = start(work, "slurmdbd", ["slurmdbd", "-D"])
    procs.append(slurmdbd)
    if not wait(slurmdbd, lambda: ":6819 " in output("ss", "-ltn"), 60):
        return "slurmdbd"
    return None


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            proc = subprocess.run(request["run"], capture_output=True, text=True, input=request.get("input"),
                                  timeout=request.get("timeout", 60), env={**os.environ, **request.get("env", {})})
            reply = {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}
        except (OSError, subprocess.TimeoutExpired) as exc:
            reply = {"rc": -1, "out": "", "err": str(exc)}
        print(json.dumps(reply), flush=True)


def main() -> int:
    if sys.argv[1] == "--netns-slurmd":
        netns_slurmd(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return 0
    work = sys.argv[1]
    with open(os.path.join(work, "spec.json")) as fh:
        spec = json.load(fh)
    procs: list[subprocess.Popen] = []
    try:
        status, procs = boot(work, spec)
        print(json.dumps(status), flush=True)
        if status["ready"]:
            serve()
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
