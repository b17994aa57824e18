"""The image cache's imports write nowhere but their work directory (soperator/node/jail_enroot.py,
writes_only_to), measured in a child process in a private mount namespace of its own on this host:
every mount read-only but the work directory, the mounts' other flags kept."""
from __future__ import annotations

import ctypes
import os

from soperator.node.jail_enroot import mounts, writes_only_to

CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x20000, 0x4000, 0x40000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8


def _in_private_namespace(work: str, scratch: str, elsewhere: list[str]) -> dict[str, str]:
    """In a child: a mount namespace of its own (nothing propagates back) with a nosuid,nodev,noexec
    tmpfs at `scratch`, writes_only_to(work), then try to write in work, scratch and each of
    `elsewhere`; returns what each attempt gave, and the mounts' options after."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            libc = ctypes.CDLL(None, use_errno=True)
            assert libc.unshare(CLONE_NEWNS) == 0
            assert libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0
            assert libc.mount(b"tmpfs", scratch.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0
            writes_only_to(work)
            results = {}
            for directory in [work, scratch, *elsewhere]:
                try:
                    with open(os.path.join(directory, "written-by-the-import"), "w") as fh:
                        fh.write("x")
                    results[directory] = "written"
                except OSError as exc:
                    results[directory] = os.strerror(exc.errno)
            results["options"] = ";".join(f"{m.point} {','.join(m.options)}" for m in mounts())
            os.write(write, repr(results).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as fh:
        out = fh.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return eval(out)  # noqa: S307 - our own child's repr of a dict of strings


def test_an_import_writes_its_work_directory_and_nothing_else(tmp_path):
    work, other, scratch = tmp_path / "work", tmp_path / "other", tmp_path / "scratch"
    for path in (work, other, scratch):
        path.mkdir()
    results = _in_private_namespace(str(work), str(scratch), [str(other), "/tmp", "/dev/shm"])
    assert results.pop(str(work)) == "written"
    options = results.pop("options")
    assert results == {str(path): "Read-only file system" for path in (scratch, other, "/tmp", "/dev/shm")}
    # Nothing came back to this namespace: the child's file in work only, its tmpfs gone with it.
    assert (work / "written-by-the-import").exists() and not (other / "written-by-the-import").exists()
    assert not os.path.exists("/tmp/written-by-the-import") and os.listdir(scratch) == []
    # The tmpfs keeps nosuid,nodev,noexec, read-only now.
    kept = [o.split()[1] for o in options.split(";") if o.split()[0] == str(scratch)][-1].split(",")
    assert {"ro", "nosuid", "nodev", "noexec"} <= set(kept), kept
