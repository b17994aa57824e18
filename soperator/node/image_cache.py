"""The image cache daemon of a Pyxis worker: one import of a registry image per node, shared by every
user, written by root alone (image_store.py keeps the files).

Pyxis calls its importer (pyxis_importer.py, in the jail, as the step's user) for every image that is
not a file; the importer asks this daemon over a unix socket in the node-local enroot directory, which
the jail shows at the same path, and gets the path of a cached squashfs, imported first when it is not
there, or why not.

Imports run in the jail as root, held to their own work directory and PID namespace (jail_enroot.py:
a user cannot run `enroot import` there at all), with the node set's enroot.conf and registry
credentials (the Secret every user of the node set can read already): a user's own credentials never
reach the cache. The key is the registry and repository the image comes from with the digest that
registry gives for its manifest on this node's architecture (image_ref.py): a registry can only fill
entries of its own repositories. The import fetches that digest (not the tag, which may have moved),
and enroot checks every blob's.

What one user can make it do is bounded: a request line must come within REQUEST_SECONDS, each user
has at most PER_USER requests open, at most DIGESTS registry queries and IMPORTS imports run at once.
A daemon dying would take the worker (and its jobs) with it: every request's failure is an answer,
and the worker starts it again should it exit (supervise.py, start_restartable)."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from collections import Counter

from .image_ref import DIGEST, BadReference, ImageRef, parse
from .image_store import Full, ImageStore, TooLarge, human, sha256_of_file
from .layout import ENV, IMAGE_IMPORTS_AT_ONCE, PATHS
from .supervise import log

DIGEST_TIMEOUT = 120
IMPORT_TIMEOUT = 3 * 3600
REQUEST_SECONDS = 10
PER_USER, DIGESTS, IMPORTS = 8, 4, IMAGE_IMPORTS_AT_ONCE
# How a full volume shows in what enroot runs (tar, mksquashfs, curl, GNU parallel)...
NO_SPACE = ("No space left on device", "Disk quota exceeded", "Is the disk full?", "Failure writing output")
# ... or in the volume itself, the failed import still on it: less free than this share of it.
NEARLY_FULL = 0.02


class Answer(Exception):
    """The reply to a request that gets no image: why."""


def enroot(work: str, argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """enroot in the jail, writing to `work` only (the node code's jail-enroot helper); its output and
    errors together. Its process group is killed once it ends; its PID namespace goes with it."""
    helper = [sys.executable, "-P", "-m", "soperator_node", "jail-enroot", work, *argv]
    # The helper is this package: it finds it on the node's PYTHONPATH, and drops it before enroot.
    proc = subprocess.Popen(helper, env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
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


def out_of_space(output: str, volume: str) -> bool:
    """Did a failed import fail for want of space? Asked before its work directory is removed."""
    usage = shutil.disk_usage(volume)
    return any(text in output for text in NO_SPACE) or usage.free < usage.total * NEARLY_FULL


def _tail(text: str, lines: int = 3) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-lines:]) or "no output"


class Cache:
    def __init__(self, store: ImageStore, env: dict[str, str]):
        self.store, self.env = store, env
        self.lock = threading.Lock()  # the store's files, and `importing`: one change at a time
        self.importing: dict[str, list] = {}  # key -> [its lock, how many wait on it]
        self.digests, self.imports = threading.BoundedSemaphore(DIGESTS), threading.BoundedSemaphore(IMPORTS)

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

    def digest(self, ref: ImageRef) -> str:
        work = self._work()
        try:
            with self.digests:
                proc = enroot(work, ["digest", ref.asked], self._env(work), DIGEST_TIMEOUT)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        found = [line for line in proc.stdout.split() if DIGEST.fullmatch(line)]
        if proc.returncode != 0 or not found:
            raise Answer(f"the registry gave the node no digest for {ref.name}: {_tail(proc.stdout)}")
        return found[-1]

    def get(self, image: str, user: str) -> str:
        try:
            ref = parse(image)
        except BadReference as exc:
            raise Answer(str(exc)) from None
        digest = self.digest(ref)
        key = ref.key(digest)
        with self.lock:
            entry = self.importing.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:  # a second user of the same image waits for the first one's import
                with self.lock:
                    path, refused = self.store.lookup(key)
                if refused:
                    log(f"image cache: {ref.name}@{digest} refused and removed: {refused.reason}; importing it again")
                if path:
                    log(f"image cache: {ref.name}@{digest} for {user}: cached")
                    return path
                return self._import(ref, digest, key, user)
        finally:
            with self.lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self.importing[key]

    def _import(self, ref: ImageRef, digest: str, key: str, user: str) -> str:
        started = time.monotonic()
        work = self._work()
        failed = ""
        try:
            staged = f"{work}/image.sqsh"
            with self.imports:
                proc = enroot(work, ["import", "-o", staged, ref.pinned(digest)], self._env(work), IMPORT_TIMEOUT)
            if proc.returncode == 0 and os.path.isfile(staged):
                sha256 = sha256_of_file(staged)  # outside the lock: its writers are gone, its directory root's
                with self.lock:
                    try:
                        path, evicted = self.store.publish(key, staged, f"{ref.name}@{digest}", sha256)
                    except (TooLarge, Full) as exc:
                        raise Answer(f"{ref.name} does not fit in this node's image cache: {exc}") from None
                for gone in evicted:
                    log(f"image cache: evicted {gone} to make room")
                log(f"image cache: {ref.name}@{digest} for {user}: imported in {time.monotonic() - started:.1f} s, "
                    f"{human(os.stat(path).st_size)}; {human(self.store.usage())} of {human(self.store.limit)} cached")
                return path
            failed = "space" if out_of_space(proc.stdout, self.store.root) else _tail(proc.stdout)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if failed == "space":
            free = shutil.disk_usage(self.store.root)  # measured once the attempt is gone
            raise Answer(f"{ref.name} does not fit on this node: importing it ran out of space in "
                         f"{PATHS.enroot_runtime} (the node set's pyxis.storageSize volume; {human(free.free)} free "
                         f"of {human(free.total)} on its file system now); nothing was kept")
        raise Answer(f"the node could not import {ref.name}@{digest}: {failed}")


def _user(request: socket.socket) -> tuple[int, str]:
    creds = request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid = struct.unpack("3i", creds)[1]
    try:
        return uid, f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return uid, f"uid {uid}"


class Handler(socketserver.StreamRequestHandler):
    timeout = REQUEST_SECONDS  # for the request line; the answer may take an import's time

    def handle(self) -> None:
        server: Server = self.server  # type: ignore[assignment]
        uid, user = _user(self.request)
        with server.lock:
            server.open[uid] += 1
            busy = server.open[uid] > PER_USER
        try:
            if busy:
                raise Answer(f"{user} has {PER_USER} requests open on this node already")
            request = json.loads(self.rfile.readline(8192) or b"{}")
            image = request.get("image") if isinstance(request, dict) else None
            if not isinstance(image, str) or not image or len(image) > 1024:
                raise Answer("the request names no image")
            self.request.settimeout(None)
            reply = {"path": server.cache.get(image, user)}
        except Answer as exc:
            log(f"image cache: refused {user}: {exc}")
            reply = {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a fault in one request is that request's answer
            log(f"image cache: request of {user} failed: {type(exc).__name__}: {exc}")
            reply = {"error": f"the image cache failed: {type(exc).__name__}: {exc}"}
        finally:
            with server.lock:
                server.open[uid] -= 1
        try:
            self.wfile.write(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass  # the step went away while it waited


class Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, cache: Cache):
        super().__init__(path, Handler)
        self.cache, self.lock, self.open = cache, threading.Lock(), Counter()

    def handle_error(self, request, client_address) -> None:
        log(f"image cache: a connection failed: {sys.exc_info()[1]!r}")


def import_env(environ) -> dict[str, str]:
    """enroot's environment for the imports; mksquashfs's options from the pod's (the node set's own
    with their caches bounded: layout.IMAGE_IMPORT_SQUASH_MIB) override those of its enroot.conf."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    if environ.get(ENV.image_import_squash_options):
        env["ENROOT_SQUASH_OPTIONS"] = environ[ENV.image_import_squash_options]
    return env


def serve(socket_path: str = PATHS.image_cache_socket) -> int:
    limit = int(os.environ[ENV.image_cache_bytes])
    store = ImageStore(PATHS.image_cache, PATHS.image_cache_work, limit)
    dropped = store.prepare()
    if dropped:
        log(f"image cache: dropped what a previous container left: {', '.join(dropped)}")
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    env = import_env(os.environ)
    server = Server(socket_path, Cache(store, env))
    os.chmod(socket_path, 0o666)  # every user's importer asks; who asked is read from the socket
    log(f"image cache: serving {socket_path}; {len(store.entries())} images, {human(store.usage())} of "
        f"{human(limit)} in {PATHS.image_cache}; imports' mksquashfs options: "
        f"{env.get('ENROOT_SQUASH_OPTIONS', 'those of the enroot.conf')}")
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    return 0
