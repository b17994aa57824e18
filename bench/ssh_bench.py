"""ssh session setup into the jail (ChrootDirectory, as on login nodes) vs plain sshd, as a ratio.

`python -m bench.ssh_bench [--sessions N]`: both servers use the rendered sshd_config and run at the
same time on loopback; connections alternate between them. Each session: connect, key auth as root,
run `true`, close.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import paramiko

from soperator.keys import generate_ssh_host_keys
from soperator.render.configs import sshd_files
from tests.cluster.controlplane import free_port
from tests.conftest import make_cluster
from tests.support.thin_jail import make_thin_jail

ROOT = Path(__file__).resolve().parent.parent


def _session(port: int, key: paramiko.PKey) -> float:
    started = time.perf_counter()
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect("127.0.0.1", port=port, username="root", pkey=key, allow_agent=False, look_for_keys=False)
    _, out, _ = client.exec_command("true")
    assert out.channel.recv_exit_status() == 0
    client.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=30)
    args = parser.parse_args()
    key = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") else paramiko.RSAKey.generate(2048)
    files = sshd_files(make_cluster(login={"rootSshPublicKeys": [f"{key.get_name()} {key.get_base64()}"]}))
    files["sshd_config"] = "ListenAddress 127.0.0.1\n" + "\n".join(
        ln for ln in files["sshd_config"].splitlines() if not ln.startswith("ListenAddress")) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "files").mkdir()
        for name, text in files.items():
            (tmp / "files" / name).write_text(text)
        for key_type, host in generate_ssh_host_keys().items():
            (tmp / "files" / f"ssh_host_{key_type}_key").write_text(host.private)
        jail = make_thin_jail(tmp / "jail")
        ports = {"jail": free_port(), "plain": free_port()}
        server = subprocess.Popen(["unshare", "--mount", "--propagation", "private", sys.executable,
                                   str(ROOT / "bench" / "ssh_jail_server.py"), str(tmp / "files"), str(jail),
                                   str(ports["jail"]), str(ports["plain"])], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
        try:
            assert server.stdout.readline().strip() == "ready"
            times = {"jail": [], "plain": []}
            for name in ("jail", "plain"):
                _session(ports[name], key)  # warm-up
            for i in range(args.sessions):
                for name in (("jail", "plain") if i % 2 == 0 else ("plain", "jail")):
                    times[name].append(_session(ports[name], key))
        finally:
            server.stdin.close()
            server.wait(timeout=20)
    jail_ms, plain_ms = (statistics.median(times[n]) * 1e3 for n in ("jail", "plain"))
    print(f"ssh session (connect, auth, `true`, close), {args.sessions} each: jail {jail_ms:.1f} ms, "
          f"plain {plain_ms:.1f} ms (median); ratio jail/plain = {jail_ms / plain_ms:.3f}")


if __name__ == "__main__":
    main()
