"""Run `sshd -t` on rendered files placed at the paths the login pod mounts them at.

Runs inside a private mount namespace (tests start it with `unshare --mount`), over tmpfs, so the
host's /etc/ssh is untouched. Usage: sshd_check.py FILES_DIR; prints sshd's verdict, exits with its code.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from soperator.node.layout import PATHS


def main() -> int:
    files = sys.argv[1]
    for target in ("/etc/ssh", "/run"):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", target], check=True)
    os.makedirs("/run/sshd", mode=0o755)
    for directory in (PATHS.sshd_config_dir, PATHS.ssh_host_keys):
        os.makedirs(directory, mode=0o755)
    for name in os.listdir(files):
        src = os.path.join(files, name)
        target_dir = PATHS.ssh_host_keys if name.startswith("ssh_host_") else PATHS.sshd_config_dir
        dst = os.path.join(target_dir, name)
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o600 if name.endswith("_key") else 0o644)
    proc = subprocess.run([shutil.which("sshd") or "/usr/sbin/sshd", "-t", "-f",
                           os.path.join(PATHS.sshd_config_dir, "sshd_config")], capture_output=True, text=True)
    sys.stdout.write(proc.stdout + proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
