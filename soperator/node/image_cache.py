"""The image cache daemon of a Pyxis worker: one import of a registry image per node, shared by every
user, written by root alone (image_store.py keeps the files).

Pyxis calls its importer (pyxis_importer.py, in the jail, as the step's user) for every image that is
not a file; the importer asks this daemon over a unix socket in the node-local enroot directory, which
the jail shows at the same path, and gets the path of a cached squashfs, imported first when it is not
there, or why not.

Imports run in the jail as root, held to their own work directory (jail_enroot.py: a user cannot
run `enroot import` there at all), with the node set's enroot.conf and registry credentials (the
Secret every user of the node set can read already): a user's own credentials never reach the cache.
The key is the digest the registry gives for the image's manifest on this node's architecture; the
import fetches that digest (not the tag, which may have moved), and enroot checks every blob's.

A daemon dying would take the worker (and its jobs) with it: every request's failure is an answer,
and the worker starts it again should it exit (supervise.py, start_restartable)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time

from .image_store import DIGEST, Full, ImageStore, TooLarge, human
from .layout import ENV, PATHS
from .supervise import log

DIGEST_TIMEOUT = 120
IMPORT_TIMEOUT = 3 * 3600
# How a full volume shows in what enroot runs (tar, mksquashfs, curl, GNU parallel)...
NO_SPACE = ("No space left on device", "Disk quota exceeded", "Is the disk full?", "Failure writing output")
# ... or in the volume itself, the failed import still on it: less free than this share of it.
NEARLY_FULL = 0.02
PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")


class Answer(Exception):
    """The reply to a request that gets no image: why."""


def pinned(image: str, digest: str) -> str:
    """The image by its digest: enroot ignores a tag beside one (docker://host/repo:tag@sha256:…)."""
    return PINNED.sub("", image) + "@" + digest


def enroot(work: str, argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """enroot in the jail, writing to `work` only (the node code's jail-enroot helper); its output and
    errors together. Everything it started is killed once it ends (its own session)."""
    helper = [sys.executable, "-P", "-m", "soperator_node", "jail-enroot", work, *argv]
    # The helper is this package: it finds it on the node's PYTHONPATH, and drops it before enroot.
    proc = subprocess.Popen(helper, env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = f"(stopped after {timeout:.0f} s)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(helper, proc.returncode, out, None)


class Cache:
    def __init__(self, store: ImageStore, env: dict[str, str]):
        self.store, self.env = store, env
        self.lock = threading.Lock()  # the store's files: one change at a time
        self.importing: dict[str, threading.Lock] = {}

    def _work(self) -> str:
        """A work directory for one enroot run, with every path enroot writes to in it."""
        work = self.store.new_work()
        for name in ("cache", "data", "run", "tmp"):
            os.mkdir(f"{work}/{name}", 0o700)
        return work

    def _env(self, work: str) -> dict[str, str]:
        # Everything enroot writes goes to the work directory; the rest is the node set's enroot.conf.
        return {**self.env, "HOME": work, "TMPDIR": f"{work}/tmp", "ENROOT_CACHE_PATH": f"{work}/cache",
                "ENROOT_DATA_PATH": f"{work}/data", "ENROOT_RUNTIME_PATH": f"{work}/run",
                "ENROOT_TEMP_PATH": f"{work}/tmp"}

    def digest(self, image: str) -> str:
        work = self._work()
        try:
            proc = enroot(work, ["digest", image], self._env(work), DIGEST_TIMEOUT)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        found = [line for line in proc.stdout.split() if DIGEST.match(line)]
        if proc.returncode != 0 or not found:
            raise Answer(f"the registry gave the node no digest for {image}: {_tail(proc.stdout)}")
        return found[-1]

    def get(self, image: str, user: str) -> str:
        if not image.startswith("docker://"):
            raise Answer(f"only docker:// images come from a registry through the node's image cache, not {image}")
        digest = self.digest(image)
        with self.lock:
            importing = self.importing.setdefault(digest, threading.Lock())
        with importing:  # a second user of the same image waits for the first one's import
            with self.lock:
                path, refused = self.store.lookup(digest)
            if refused:
                log(f"image cache: {image} ({digest}) refused and removed: {refused.reason}; importing it again")
            if path:
                log(f"image cache: {image} ({digest}) for {user}: cached")
                return path
            return self._import(image, digest, user)

    def _import(self, image: str, digest: str, user: str) -> str:
        started = time.monotonic()
        work = self._work()
        try:
            staged = f"{work}/image.sqsh"
            proc = enroot(work, ["import", "-o", staged, pinned(image, digest)], self._env(work), IMPORT_TIMEOUT)
            if proc.returncode != 0 or not os.path.isfile(staged):
                if out_of_space(proc.stdout, self.store.root):
                    free = shutil.disk_usage(self.store.root)
                    raise Answer(f"{image} does not fit on this node: importing it ran out of space in "
                                 f"{self.store.root} (the node set's pyxis.storageSize volume: {human(free.free)} "
                                 f"free of {human(free.total)} once the import was removed); nothing was kept")
                raise Answer(f"the node could not import {image}: {_tail(proc.stdout)}")
            with self.lock:
                try:
                    path, evicted = self.store.publish(digest, staged, image)
                except (TooLarge, Full) as exc:
                    raise Answer(f"{image} does not fit in this node's image cache: {exc}") from None
            for gone in evicted:
                log(f"image cache: evicted {gone} to make room")
            log(f"image cache: {image} ({digest}) for {user}: imported in {time.monotonic() - started:.1f} s, "
                f"{human(os.stat(path).st_size)}; {human(self.store.usage())} of {human(self.store.limit)} cached")
            return path
        finally:
            shutil.rmtree(work, ignore_errors=True)


def out_of_space(output: str, volume: str) -> bool:
    """Did a failed import fail for want of space? Asked before its work directory is removed."""
    usage = shutil.disk_usage(volume)
    return any(text in output for text in NO_SPACE) or usage.free < usage.total * NEARLY_FULL


def _tail(text: str, lines: int = 3) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "no output"


def _user(request: socket.socket) -> str:
    import pwd
    import struct
    creds = request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid = struct.unpack("3i", creds)[1]
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        cache: Cache = self.server.cache  # type: ignore[attr-defined]
        try:
            request = json.loads(self.rfile.readline(65536) or b"{}")
            image = request.get("image")
            if not isinstance(image, str) or not image or len(image) > 4096:
                raise Answer("the request names no image")
            reply = {"path": cache.get(image, _user(self.request))}
        except Answer as exc:
            reply = {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a fault in one request is that request's answer
            log(f"image cache: request failed: {type(exc).__name__}: {exc}")
            reply = {"error": f"the image cache failed: {type(exc).__name__}: {exc}"}
        try:
            self.wfile.write(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass  # the step went away while it waited


class Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


def serve(socket_path: str = PATHS.image_cache_socket) -> int:
    limit = int(os.environ[ENV.image_cache_bytes])
    store = ImageStore(PATHS.image_cache, limit)
    dropped = store.prepare()
    if dropped:
        log(f"image cache: dropped what a previous container left: {', '.join(dropped)}")
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    server = Server(socket_path, Handler)
    server.cache = Cache(store, env)  # type: ignore[attr-defined]
    os.chmod(socket_path, 0o666)  # every user's importer asks; who asked is read from the socket
    log(f"image cache: serving {socket_path}; {len(store.entries())} images, {human(store.usage())} of "
        f"{human(limit)} in {PATHS.image_cache}")
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    return 0
