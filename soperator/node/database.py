"""The accounting database: Debian's MariaDB on the pod's volume, made ready for slurmdbd. On a first
start the data directory is initialised; at every start the database and slurmdbd's account exist with
the password given (set again, so a changed Secret takes effect), and the files belong to this image's
mysql user. Nothing else is ever rewritten."""
from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess

from .layout import PATHS, PORTS

_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def prepare_datadir(data: str) -> bool:
    """Initialise an empty data directory; True if it was (a first start), False if it holds a database.
    A database made by another image's mysql user (an image of an older release, whose mysql had
    other ids) is given to this image's: the volume is the database's alone."""
    if os.path.isdir(os.path.join(data, "mysql")):
        mysql = pwd.getpwnam("mysql")
        if os.stat(data).st_uid != mysql.pw_uid:
            _chown_tree(data, mysql.pw_uid, mysql.pw_gid)
        return False
    os.makedirs(data, exist_ok=True)
    shutil.chown(data, "mysql", "mysql")
    # Root logs in by the unix socket only: no root password exists to leak or to lose.
    subprocess.run(["mariadb-install-db", "--user=mysql", f"--datadir={data}", "--skip-test-db",
                    "--auth-root-authentication-method=socket"], check=True, capture_output=True, text=True)
    return True


def _chown_tree(top: str, uid: int, gid: int) -> None:
    for root, dirs, files in os.walk(top):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, uid, gid)


def server_argv(data: str, port: int = PORTS.database, bind: str = "0.0.0.0") -> list[str]:
    os.makedirs(os.path.dirname(PATHS.db_socket), exist_ok=True)
    shutil.chown(os.path.dirname(PATHS.db_socket), "mysql", "mysql")
    # InnoDB with a larger log and lock wait: what SchedMD advises for slurmdbd's big transactions.
    return ["mariadbd", "--user=mysql", f"--datadir={data}", f"--socket={PATHS.db_socket}", f"--port={port}",
            f"--bind-address={bind}", "--skip-name-resolve", "--innodb-log-file-size=64M",
            "--innodb-lock-wait-timeout=900", "--innodb-buffer-pool-size=256M"]


def ensure_account(database: str, user: str, password: str) -> None:
    """The database and slurmdbd's user on it, with this password. SQL goes on stdin: the password
    never shows in a process list."""
    for what, name in (("database", database), ("user", user)):
        if not _NAME.match(name):
            raise ValueError(f"{what} name {name!r}: letters, digits and _ only")
    quoted = password.replace("\\", "\\\\").replace("'", "\\'")
    sql = (f"CREATE DATABASE IF NOT EXISTS `{database}`;\n"
           f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{quoted}';\n"
           f"ALTER USER '{user}'@'%' IDENTIFIED BY '{quoted}';\n"
           f"GRANT ALL ON `{database}`.* TO '{user}'@'%';\n")
    subprocess.run(["mariadb", f"--socket={PATHS.db_socket}", "-u", "root"], input=sql, check=True, capture_output=True,
                   text=True)
