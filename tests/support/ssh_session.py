"""A paramiko session as a user of the cluster has one: key login, commands with their exit codes."""
from __future__ import annotations

import paramiko


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
