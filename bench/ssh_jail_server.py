"""Two real sshd servers with the rendered sshd_config, for bench.ssh_bench: one chrooting into a thin
jail at /mnt/jail (as on a login node), one with `ChrootDirectory none`. Runs inside a private mount
namespace (`unshare --mount`), so tmpfs mounts over /etc/ssh, /run and /mnt stay invisible to the host.

Usage: ssh_jail_server.py FILES_DIR JAIL PORT_JAIL PORT_PLAIN; prints "ready", serves until stdin closes.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from soperator.node.layout import PATHS


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main() -> int:
    files, jail, port_jail, port_plain = sys.argv[1:5]
    for target in ("/etc/ssh", "/run", "/mnt"):
        mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", target)
    os.makedirs("/run/sshd", mode=0o755)
    os.makedirs(PATHS.jail)
    mount("--bind", jail, PATHS.jail)
    mount("--bind", "-o", "ro", "/usr", f"{PATHS.jail}/usr")
    mount("--rbind", "/dev", f"{PATHS.jail}/dev")
    for directory in (PATHS.sshd_config_dir, PATHS.ssh_host_keys):
        os.makedirs(directory, mode=0o755)
    for name in os.listdir(files):
        target_dir = PATHS.ssh_host_keys if name.startswith("ssh_host_") else PATHS.sshd_config_dir
        shutil.copyfile(os.path.join(files, name), os.path.join(target_dir, name))
        os.chmod(os.path.join(target_dir, name), 0o600 if name.endswith("_key") else 0o644)
    config = os.path.join(PATHS.sshd_config_dir, "sshd_config")
    procs = [subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", config, "-p", port, *extra],
                              stderr=open(os.path.join(files, f"sshd-{port}.log"), "w"))
             for port, extra in ((port_jail, []), (port_plain, ["-o", "ChrootDirectory=none"]))]
    time.sleep(0.5)
    print("ready", flush=True)
    sys.stdin.read()
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
