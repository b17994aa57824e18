"""A paramiko session as a user of the cluster has one: key login, commands with their exit codes."""
from __future__ import annotations

import paramiko

from tests.support.wait import until


def connect(host: str, port: int, user: str, key: paramiko.PKey, timeout: float = 10) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(host, port=port, username=user, pkey=key, allow_agent=False, look_for_keys=False,
                   timeout=timeout)
    return client


def run(client: paramiko.SSHClient, command: str, timeout: float = 60) -> tuple[int, str, str]:
    _, stdout, stderr = client.exec_command(command, timeout=timeout)
    out, err = stdout.read().decode(), stderr.read().decode()
    return stdout.channel.recv_exit_status(), out, err


class Login:
    """root's (or a user's) ssh session on a login node, as a user keeps one: commands must succeed;
    made anew when the login pod is replaced (an upgrade)."""

    def __init__(self, host: str, port: int, key: paramiko.PKey, user: str = "root", timeout: float = 300):
        """`timeout`: how long a command may take."""
        self.host, self.port, self.key, self.user, self.timeout = host, port, key, user, timeout
        self.client = connect(host, port, user, key, timeout=30)

    def run(self, command: str, timeout: float | None = None) -> str:
        code, out, err = run(self.client, command, timeout or self.timeout)
        assert code == 0, f"`{command}` exited {code}: {out}{err}"
        return out

    def write(self, path: str, text: str) -> None:
        stdin, stdout, _ = self.client.exec_command(f"mkdir -p $(dirname {path}) && cat > {path}", timeout=30)
        stdin.write(text)
        stdin.channel.shutdown_write()
        assert stdout.channel.recv_exit_status() == 0

    def reconnect(self) -> None:
        self.client.close()
        self.client = until(self._try_connect, 180, "ssh to the new login pod", interval=2)

    def _try_connect(self) -> paramiko.SSHClient | None:
        try:
            return connect(self.host, self.port, self.user, self.key, timeout=10)
        except (OSError, paramiko.SSHException):
            return None

    def close(self) -> None:
        self.client.close()
