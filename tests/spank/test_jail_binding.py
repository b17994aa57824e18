"""The plugin's C jail code, called directly through its cffi binding, in child processes."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pytest

from tests.support.thin_jail import MARKER, make_thin_jail

lib_mod = pytest.importorskip("spank_chroot._jail", reason="run `python -m spank_chroot.build` first")
ffi, lib = lib_mod.ffi, lib_mod.lib
STEP_EXTERN, STEP_BATCH, STEP_INTERACTIVE = 0xFFFFFFFC, 0xFFFFFFFB, 0xFFFFFFFA
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE, MS_RDONLY, MS_REMOUNT = 4096, 16384, 1 << 18, 1, 32


def _err():
    return ffi.new("char[512]")


def _argv(*args):
    keep = [ffi.new("char[]", a.encode()) for a in args]
    return keep, ffi.new("const char *[]", keep + [ffi.NULL])


@pytest.mark.parametrize("remote,step,args,expected", [
    (False, 0, ["/mnt/jail"], lib.SOPERATOR_SKIP),
    (True, STEP_EXTERN, ["/mnt/jail"], lib.SOPERATOR_SKIP),
    (True, STEP_BATCH, ["/mnt/jail"], lib.SOPERATOR_ENTER),
    (True, STEP_INTERACTIVE, ["/mnt/jail"], lib.SOPERATOR_ENTER),
    (True, 0, ["/mnt/jail"], lib.SOPERATOR_ENTER),
    (True, 0, [], lib.SOPERATOR_REFUSE),
    (True, 0, ["/a", "/b"], lib.SOPERATOR_REFUSE),
    (True, 0, ["/mnt/jail", "allow_userns"], lib.SOPERATOR_ENTER),
    (True, 0, ["/mnt/jail", "allow_userns", "nosuid=off"], lib.SOPERATOR_REFUSE),
    (True, 0, [""], lib.SOPERATOR_REFUSE),
    (True, 0, ["/mnt/jail", "job_tmp=/var/lib/t", "job_shm=/dev/shm/j", "allow_userns"], lib.SOPERATOR_ENTER),
    (True, 0, ["/mnt/jail", "job_tmp=var/lib/t"], lib.SOPERATOR_REFUSE),
    (True, 0, ["/mnt/jail", "job_shm="], lib.SOPERATOR_REFUSE),
])
def test_decide(remote, step, args, expected):
    keep, argv = _argv(*args)
    err = _err()
    assert lib.soperator_decide(int(remote), step, len(args), argv, err, 512) == expected
    if expected == lib.SOPERATOR_REFUSE:
        assert b"jail path" in ffi.string(err)


def test_check_accepts_a_populated_jail(tmp_path):
    jail = make_thin_jail(tmp_path / "jail")
    os.rmdir(jail / "usr")
    (jail / "usr" / "bin").mkdir(parents=True)
    (jail / "usr" / "bin" / "sh").write_text("#!/x\n")
    os.chmod(jail / "usr" / "bin" / "sh", 0o755)
    assert lib.soperator_check_jail(str(jail).encode(), _err(), 512) == 0


@pytest.mark.parametrize("case,reason", [
    ("relative", b"must be absolute"), ("missing", b"No such file"), ("file", b"not a directory"),
    ("empty", b"holds no /bin/sh"),
])
def test_check_rejects_unusable_jails(tmp_path, case, reason):
    path = {"relative": "jail", "missing": str(tmp_path / "nope"), "file": str(tmp_path / "f"),
            "empty": str(tmp_path)}[case]
    (tmp_path / "f").write_text("")
    err = _err()
    assert lib.soperator_check_jail(path.encode(), err, 512) == -1
    assert reason in ffi.string(err)


def _in_child(fn) -> tuple[int, bytes]:
    """Run fn in a forked child (it changes the mount namespace); return (exit code, what it wrote)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 1
        try:
            code = fn(write)
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), data


def _bind_usr(jail: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.unshare(CLONE_NEWNS) == 0
    assert libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
    assert libc.mount(b"/usr", f"{jail}/usr".encode(), None, MS_BIND | MS_REC, None) == 0
    # The node binds its /dev into the jail; the procfs masks need its null device.
    open(f"{jail}/dev/null", "a").close()
    assert libc.mount(b"/dev/null", f"{jail}/dev/null".encode(), None, MS_BIND, None) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_enter_jail_moves_the_process_into_it(tmp_path):
    jail = str(make_thin_jail(tmp_path / "jail"))

    def child(out):
        _bind_usr(jail)
        err = _err()
        if lib.soperator_enter_jail(jail.encode(), err, 512) != 0:
            os.write(out, b"ERR " + ffi.string(err))
            return 3
        shown = subprocess.run(["/bin/sh", "-c", "cat /jail-marker; . /etc/os-release; echo $ID; "
                                "ls /proc/self/ >/dev/null && echo proc-ok; pwd"], capture_output=True)
        os.write(out, shown.stdout + shown.stderr)
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    assert data.decode().split() == [MARKER, MARKER, "proc-ok", "/"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_old_root_is_not_reachable_from_the_jail(tmp_path):
    """Not by path, not in the mount table, and not by the classic escape (chroot into a
    subdirectory, then `..` past the new root), which leads back into the jail: the node's root
    lies under the jail's mount, and `..` at a mount's root comes back down through it. Root here
    keeps CAP_SYS_CHROOT, which job tasks do not even have."""
    jail = str(make_thin_jail(tmp_path / "jail"))
    secret = tmp_path / "host-only"
    secret.write_text("host\n")

    def child(out):
        _bind_usr(jail)
        if lib.soperator_enter_jail(jail.encode(), _err(), 512) != 0:
            return 3
        mount_points = [line.split()[4] for line in open("/proc/self/mountinfo")]
        leaked = any(p.startswith(str(tmp_path)) for p in mount_points)
        os.write(out, f"{os.path.exists(str(secret))} {leaked} ".encode())
        os.makedirs("/tmp/escape", exist_ok=True)
        os.chroot("/tmp/escape")
        for _ in range(64):
            os.chdir("..")
        os.chroot(".")
        os.write(out, f"{os.path.exists(str(secret))} {os.path.exists('/jail-marker')}".encode())
        return 0

    code, data = _in_child(child)
    assert code == 0 and data == b"False False False True", data


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("enter", ["soperator_enter_jail", "soperator_enter_session"])  # a step's, a login's
def test_missing_jail_fails_and_leaves_the_root_alone(tmp_path, enter):
    def child(out):
        err = _err()
        rc = getattr(lib, enter)(str(tmp_path / "absent").encode(), err, 512)
        os.write(out, f"{rc} {os.path.exists('/etc/os-release')} ".encode() + ffi.string(err))
        return 0

    code, data = _in_child(child)
    assert code == 0
    rc, host_root, reason = data.decode().split(" ", 2)
    assert rc == "-1" and host_root == "True" and "No such file" in reason


@pytest.mark.parametrize("args,allowed", [(["/j"], 0), (["/j", "allow_userns"], 1), (["allow_userns"], 0)])
def test_allows_userns_only_as_an_option_after_the_path(args, allowed):
    keep, argv = _argv(*args)
    assert lib.soperator_allows_userns(len(args), argv) == allowed


def _mount_seen_in_step(tmp_path, point: str) -> str:
    """The mountinfo line of `point` as a process that entered the jail sees it."""
    jail = str(make_thin_jail(tmp_path / "jail"))

    def child(out):
        _bind_usr(jail)
        if lib.soperator_enter_jail(jail.encode(), _err(), 512) != 0:
            return 3
        os.write(out, [line for line in open("/proc/self/mountinfo") if line.split()[4] == point][-1].encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    return data.decode()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_the_jail_root_is_nosuid_and_nodev_in_a_step(tmp_path):
    options = _mount_seen_in_step(tmp_path, "/").split()[5]
    assert {"nosuid", "nodev"} <= set(options.split(",")), options


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_the_steps_proc_hides_other_users_processes(tmp_path):
    assert "hidepid=" in _mount_seen_in_step(tmp_path, "/proc").split(" - ")[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("allow_userns", [0, 1])
def test_a_restricted_task_gains_no_privileges_and_no_user_namespace(allow_userns):
    """Even root, in the restricted task, cannot create a user namespace (unless allowed); a
    plain fork and a new thread (glibc tries clone3 first) still work."""
    def child(out):
        err = _err()
        if lib.soperator_restrict_task(allow_userns, err, 512) != 0:
            os.write(out, b"ERR " + ffi.string(err))
            return 3
        nnp = [ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("NoNewPrivs")][0]
        userns = subprocess.run(["unshare", "--user", "true"], capture_output=True)
        thread = subprocess.run([sys.executable, "-c", "import threading; t = threading.Thread(target=print); "
                                 "t.start(); t.join()"], capture_output=True)
        os.write(out, f"{nnp} {userns.returncode} {thread.returncode}".encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    nnp, userns, thread = data.decode().split()
    assert nnp == "1" and thread == "0"
    assert (userns == "0") == bool(allow_userns)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize(("restrict", "keeps_sys_admin"), [("soperator_restrict_task", False),
                                                         ("soperator_restrict_sessions", True)])
def test_what_root_keeps_after_each_restriction(restrict, keeps_sys_admin):
    """A job task loses CAP_SYS_ADMIN (root's own step cannot mount); sshd on a login node keeps its
    capabilities (it must chroot) while its sessions still get no user namespace."""
    def child(out):
        if getattr(lib, restrict)(0, _err(), 512) != 0:
            return 3
        bounding = int([ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("CapBnd")][0], 16)
        mounted = subprocess.run(["unshare", "--mount", "mount", "-t", "tmpfs", "none", "/mnt"], capture_output=True)
        userns = subprocess.run(["unshare", "--user", "true"], capture_output=True)
        os.write(out, f"{bounding >> 21 & 1} {mounted.returncode} {userns.returncode}".encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    sys_admin, mounted, userns = data.decode().split()  # CAP_SYS_ADMIN is bit 21
    assert (sys_admin == "1") == keeps_sys_admin and (mounted == "0") == keeps_sys_admin
    assert userns != "0"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("allow_userns", [0, 1])
def test_root_keeps_setfcap_to_map_itself_only_where_tasks_may_create_user_namespaces(allow_userns):
    """enroot maps root's container to root (uid_map `0 0 1`), which Linux 5.12+ allows only to a
    creator with CAP_SETFCAP: a task keeps it on Pyxis workers (allow_userns) when the worker has it
    (user-namespaced Pyxis workers only), and loses it everywhere else."""
    def child(out):
        if lib.soperator_restrict_task(allow_userns, _err(), 512) != 0:
            return 3
        bounding = int([ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("CapBnd")][0], 16)
        mapped = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True)
        os.write(out, f"{bounding >> 31 & 1} {mapped.returncode}".encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    setfcap, mapped = data.decode().split()  # CAP_SETFCAP is bit 31
    # Without allow_userns the filter refuses the namespace itself: the bounding set is what shows the
    # capability gone there too.
    assert setfcap == str(allow_userns) and (mapped == "0") == bool(allow_userns)


# x86_64 numbers: io_uring_setup, io_uring_enter, io_uring_register, bpf, keyctl, add_key, request_key,
# userfaultfd. Called with arguments no kernel accepts, so only the filter decides between ENOSYS and
# the kernel's own error.
RISKY = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321, "keyctl": 250,
         "add_key": 248, "request_key": 249, "userfaultfd": 323}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("restrict", ["soperator_restrict_task", "soperator_restrict_sessions"])
@pytest.mark.parametrize("allow_userns", [0, 1])
def test_risky_kernel_interfaces_are_refused_with_or_without_user_namespaces(restrict, allow_userns):
    """Security review, medium #3: even where user namespaces are allowed (Pyxis node sets), a task
    and a login session get no io_uring, bpf, keyrings or userfaultfd; everything else still works."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def errors():
        found = {}
        for name, nr in RISKY.items():
            ctypes.set_errno(0)
            rc = libc.syscall(ctypes.c_long(nr), ctypes.c_long(-1), ctypes.c_long(0), ctypes.c_long(0),
                              ctypes.c_long(0), ctypes.c_long(0))
            found[name] = "ok" if rc >= 0 else os.strerror(ctypes.get_errno())
        return found

    def child(out):
        before = errors()
        if getattr(lib, restrict)(allow_userns, _err(), 512) != 0:
            return 3
        after = errors()
        plain = subprocess.run(["sh", "-c", "echo still-runs"], capture_output=True, text=True).stdout.strip()
        os.write(out, json.dumps([before, after, plain]).encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    before, after, plain = json.loads(data)
    assert after == {name: os.strerror(38) for name in RISKY}  # ENOSYS
    # The kernel here has most of them (one it lacks answers ENOSYS before the filter too).
    assert sum(error != os.strerror(38) for error in before.values()) >= 6, before
    assert plain == "still-runs"


# The same interfaces through the i386 ABI: int 0x80 with the 32-bit numbers, from a 64-bit program.
INT80 = r"""
#include <stdio.h>
int main(void) {
    const long nrs[] = {425, 426, 427, 357, 288, 286, 287, 374};
    for (int i = 0; i < 8; i++) {
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nrs[i]), "b"(-1L), "c"(0L), "d"(0L) : "memory");
        printf("%ld ", ret);
    }
    return 0;
}
"""


@pytest.mark.skipif(os.geteuid() != 0 or os.uname().machine != "x86_64", reason="needs root on x86_64")
def test_risky_kernel_interfaces_are_refused_through_the_i386_abi_too(tmp_path):
    (tmp_path / "int80.c").write_text(INT80)
    subprocess.run(["gcc", "-O0", "-o", str(tmp_path / "int80"), str(tmp_path / "int80.c")], check=True)
    before = subprocess.run([str(tmp_path / "int80")], capture_output=True, text=True)
    if before.returncode != 0:
        pytest.skip(f"no i386 emulation in this kernel ({before.returncode})")

    def child(out):
        if lib.soperator_restrict_task(1, _err(), 512) != 0:
            return 3
        after = subprocess.run([str(tmp_path / "int80")], capture_output=True, text=True)
        os.write(out, after.stdout.encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    assert data.decode().split() == ["-38"] * 8  # -ENOSYS
    assert before.stdout.split().count("-38") <= 2, before.stdout


@pytest.mark.parametrize("template,ok", [
    ("/run/enroot/user-%u", True), ("/run/pyxis/%u", True), ("run/pyxis/%u", False), ("/run/pyxis", False),
    ("/run/%u/%u", False), ("/run/%s", False), ("/run/%", False),
])
def test_user_dir_templates(template, ok):
    assert bool(lib.soperator_user_dir_template_ok(template.encode())) == ok


def test_the_nodes_list_is_read_and_a_missing_list_is_an_empty_one(tmp_path):
    buf, err = ffi.new("char[2048]"), _err()
    assert lib.soperator_read_user_dirs(str(tmp_path / "none").encode(), buf, 2048, err, 512) == 0
    assert ffi.string(buf) == b""
    (tmp_path / "list").write_text("/run/pyxis/%u\n/run/enroot/user-%u\n")
    assert lib.soperator_read_user_dirs(str(tmp_path / "list").encode(), buf, 2048, err, 512) == 0
    assert ffi.string(buf) == b"/run/pyxis/%u\n/run/enroot/user-%u\n"
    (tmp_path / "long").write_text("/x/%u\n" * 1000)
    assert lib.soperator_read_user_dirs(str(tmp_path / "long").encode(), buf, 2048, err, 512) == -1
    assert "longer than 2047 bytes" in ffi.string(err).decode()


def _user_dirs(root, uid, list_text=None):
    text = list_text if list_text is not None else f"{root}/pyxis/%u\n{root}/enroot/user-%u\n"
    err = _err()
    return lib.soperator_user_dirs(text.encode(), uid, uid, err, 512), ffi.string(err).decode()


def _parents(tmp_path, mode=0o755):
    for name in ("pyxis", "enroot"):
        (tmp_path / name).mkdir()
        os.chmod(tmp_path / name, mode)
    return tmp_path


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown, root-owned parents)")


@needs_root
def test_a_steps_user_dirs_are_made_by_root_for_the_user_alone(tmp_path):
    root = _parents(tmp_path)
    assert _user_dirs(root, 1001) == (0, "")
    for path in (root / "pyxis" / "1001", root / "enroot" / "user-1001"):
        st = os.lstat(path)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1001, 1001, 0o700)
    # The user's own, from an earlier step: used as it is.
    assert _user_dirs(root, 1001) == (0, "")


@needs_root
def test_a_planted_user_dir_refuses_the_step_and_is_left_alone(tmp_path):
    root = _parents(tmp_path)
    planted = root / "enroot" / "user-1002"
    (planted / "data" / "pyxis_torch").mkdir(parents=True)
    os.chown(planted, 1001, 1001)  # Mallory's, under Bob's name
    rc, err = _user_dirs(root, 1002)
    assert rc == -1 and f"{planted} is not the job user's own (uid 1002): it is a directory of uid 1001" in err
    assert (planted / "data" / "pyxis_torch").is_dir() and os.lstat(planted).st_uid == 1001


@needs_root
@pytest.mark.parametrize("kind", ["link", "file", "group-writable"])
def test_a_user_dir_that_is_not_a_private_directory_is_refused(tmp_path, kind):
    root = _parents(tmp_path)
    path = root / "pyxis" / "1002"
    if kind == "link":
        (tmp_path / "elsewhere").mkdir()
        path.symlink_to(tmp_path / "elsewhere")
        os.lchown(path, 1002, 1002)
    elif kind == "file":
        path.write_text("")
        os.chown(path, 1002, 1002)
    else:
        path.mkdir()
        os.chown(path, 1002, 1002)
        os.chmod(path, 0o770)
    rc, err = _user_dirs(root, 1002)
    assert rc == -1 and "is not the job user's own" in err, err


@needs_root
@pytest.mark.parametrize("mode", [0o1777, 0o775])
def test_a_parent_others_may_write_refuses_the_step(tmp_path, mode):
    root = _parents(tmp_path, mode=mode)
    rc, err = _user_dirs(root, 1002)
    assert rc == -1 and "must be a directory of root's that nobody else may write" in err and f"mode {mode:04o}" in err
    assert not (root / "pyxis" / "1002").exists()


def test_a_missing_parent_or_a_bad_line_refuses_the_step(tmp_path):
    rc, err = _user_dirs(tmp_path, 1002)
    assert rc == -1 and f"{tmp_path}/pyxis: No such file or directory" in err
    rc, err = _user_dirs(tmp_path, 1002, "relative/%u\n")
    assert rc == -1 and "'relative/%u' is not an absolute path with one %u" in err
    assert _user_dirs(tmp_path, 1002, "") == (0, "") and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_root_gets_no_power_back_from_a_full_inheritable_set():
    """Root's exec takes its permitted set from the inheritable set as well as the bounding set: a
    runtime that leaves SYS_ADMIN inheritable would hand it back to root's task after the bounding
    set lost it. The restricted task trims the inheritable and ambient sets too."""
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    def child(out):
        libc = ctypes.CDLL(None, use_errno=True)
        header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
        assert libc.capget(ctypes.byref(header), data) == 0
        for word in data:
            word.inheritable = word.permitted
        assert libc.capset(ctypes.byref(header), data) == 0
        if lib.soperator_restrict_task(0, _err(), 512) != 0:
            return 3
        shown = subprocess.run(["grep", "^Cap", "/proc/self/status"], capture_output=True, text=True).stdout
        os.write(out, shown.encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    caps = {line.split(":")[0]: int(line.split()[1], 16) for line in data.decode().splitlines()}
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert not caps[name] & (1 << 21), (name, data)  # CAP_SYS_ADMIN
    assert caps["CapEff"] == caps["CapBnd"] and caps["CapEff"] != 0  # root keeps the small allowlist


# The OCI runtimes' default lists (proc_mask.c holds the same).
READ_ONLY = ("bus", "fs", "irq", "sys", "sysrq-trigger")
MASKED = ("acpi", "asound", "interrupts", "kcore", "keys", "latency_stats", "sched_debug", "scsi", "timer_list",
          "timer_stats")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_the_steps_procfs_keeps_the_runtimes_masks(tmp_path):
    """A fresh procfs has none of the runtime's masks: root could write kernel.core_pattern (a way from
    jail root to node root) or trigger sysrq. In the jail they are back, for root too, with every
    capability this test process has."""
    jail = str(make_thin_jail(tmp_path / "jail"))

    def child(out):
        _bind_usr(jail)
        if lib.soperator_enter_jail(jail.encode(), _err(), 512) != 0:
            return 3
        seen = {}
        for path in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"):
            try:
                with open(path, "w") as fh:
                    fh.write("")
                seen[path] = "writable"
            except OSError as exc:  # this kernel may have no sysrq at all
                seen[path] = exc.strerror if os.path.exists(path) else "Read-only file system"
        for path in ("/proc/timer_list", "/proc/keys"):  # each hidden: an empty file, if the kernel has it
            seen[path] = len(open(path).read()) if os.path.exists(path) else 0
        # Every entry of the runtime's lists that this kernel has is a mount of its own: read-only, or
        # something laid over it.
        mounts = {line.split()[4]: line.split()[5].split(",") for line in open("/proc/self/mountinfo")}
        present = {name: os.path.lexists(f"/proc/{name}") for name in READ_ONLY + MASKED}
        seen["unmasked"] = [n for n in MASKED if present[n] and f"/proc/{n}" not in mounts]
        seen["writable"] = [n for n in READ_ONLY if present[n] and "ro" not in mounts.get(f"/proc/{n}", [])]
        os.write(out, json.dumps(seen).encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    assert json.loads(data) == {"/proc/sys/kernel/core_pattern": "Read-only file system",
                                "/proc/sysrq-trigger": "Read-only file system", "/proc/timer_list": 0,
                                "/proc/keys": 0, "unmasked": [], "writable": []}, data


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("null", ["file", "other-device"])
def test_a_jail_whose_null_device_is_not_one_refuses_the_step(tmp_path, null):
    """Masked files are bound to /dev/null: were the jail's a plain file (or another device), each
    would become a file root could write, so the step is refused instead."""
    jail = str(make_thin_jail(tmp_path / "jail"))

    def child(out):
        _bind_usr(jail)
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.umount2(f"{jail}/dev/null".encode(), 0) == 0
        if null == "other-device":  # /dev/zero in its place
            assert libc.mount(b"/dev/zero", f"{jail}/dev/null".encode(), None, MS_BIND, None) == 0
        err = _err()
        rc = lib.soperator_enter_jail(jail.encode(), err, 512)
        os.write(out, f"{rc} ".encode() + ffi.string(err))
        return 0

    code, data = _in_child(child)
    assert code == 0 and data.decode() == "-1 /dev/null is not the null device (character device 1:3): /proc " \
                                          "cannot be masked with it", data


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_login_session_enters_the_jail_with_the_steps_bounding_set(tmp_path):
    """What the PAM module does in a connection's sshd (pam_jail.c): the jail as root in a namespace
    of its own, then no CAP_SYS_ADMIN and no CAP_SYS_CHROOT for what it execs (root's shell): root
    can neither mount nor chroot, and the node's root is not there to reach."""
    jail = str(make_thin_jail(tmp_path / "jail"))
    secret = tmp_path / "host-only"
    secret.write_text("host\n")

    def child(out):
        _bind_usr(jail)
        err = _err()
        if lib.soperator_enter_session(jail.encode(), err, 512) != 0:
            os.write(out, b"ERR " + ffi.string(err))
            return 3
        shown = subprocess.run(["sh", "-c", "cat /jail-marker; grep CapBnd /proc/self/status; "
                                "unshare --mount mount -t tmpfs none /mnt 2>/dev/null && echo mounted || echo no-mount; "
                                "mkdir -p /tmp/x; chroot /tmp/x /bin/true 2>/dev/null && echo chrooted || echo no-chroot; "
                                f"test -e {secret} && echo host-seen || echo host-unseen"], capture_output=True, text=True)
        os.write(out, shown.stdout.encode() + shown.stderr.encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    marker, _, bounding, mounted, chrooted, host = data.decode().split()
    assert marker == MARKER
    assert not int(bounding, 16) & (1 << 21) and not int(bounding, 16) & (1 << 18), bounding  # SYS_ADMIN, SYS_CHROOT
    assert (mounted, chrooted, host) == ("no-mount", "no-chroot", "host-unseen")


def _read_only_in_new_namespace(root: bytes, err, errlen: int) -> int:
    """The fallback for kernels without mount_setattr, called as the task would get it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return -1
    return lib.soperator_remount_read_only_under(root, err, errlen)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.parametrize("make_read_only", [lib.soperator_read_only_cgroups, _read_only_in_new_namespace],
                         ids=["mount_setattr", "remount-each"])
def test_a_tasks_cgroups_are_read_only_for_it_alone(tmp_path, make_read_only):
    """slurmstepd writes the job's cgroups through the jail's writable cgroup mounts; the task sees them
    read-only (and every mount below, as cgroup v1's controllers are), in a namespace of its own, so the
    step keeps its writable view. tmpfs mounts stand in for the cgroup ones."""
    root, below = tmp_path / "cgroup", tmp_path / "cgroup" / "memory"

    def step(out):
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.unshare(CLONE_NEWNS) == 0
        assert libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
        root.mkdir()
        assert libc.mount(b"tmpfs", str(root).encode(), b"tmpfs", 0, None) == 0
        below.mkdir()
        assert libc.mount(b"tmpfs", str(below).encode(), b"tmpfs", 0, None) == 0

        def task(task_out):
            if make_read_only(str(root).encode(), _err(), 512) != 0:
                return 3
            seen = {}
            for where in (root, below):
                try:
                    (where / "limit").write_text("1")
                    seen[where.name] = "writable"
                except OSError as exc:
                    seen[where.name] = exc.strerror
            os.write(task_out, json.dumps(seen).encode())
            return 0

        code, data = _in_child(task)
        # The step's own view stays writable.
        (root / "after").write_text("1")
        (below / "after").write_text("1")
        os.write(out, json.dumps({"code": code, "task": json.loads(data or b"{}")}).encode())
        return 0

    code, data = _in_child(step)
    assert code == 0, data
    assert json.loads(data) == {"code": 0, "task": {"cgroup": "Read-only file system",
                                                    "memory": "Read-only file system"}}, data
    assert lib.soperator_read_only_cgroups(str(tmp_path / "absent").encode(), _err(), 512) == 0


@pytest.mark.skipif(os.geteuid() != 0 or os.uname().machine != "x86_64", reason="needs root; x86_64 numbers")
def test_an_import_may_make_a_new_file_system_and_never_another_view_of_one(tmp_path):
    """The image cache's imports (root, jail_enroot.py): a new tmpfs and a change of propagation still
    mount (enroot's overlay needs both); a remount (read-write again), a bind, a move, umount, chroot,
    pivot_root, setns and the new mount API all fail with EPERM."""
    libc = ctypes.CDLL(None, use_errno=True)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()

    def child(out):
        if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            return 3
        if libc.mount(b"tmpfs", str(tmp_path / "a").encode(), b"tmpfs", MS_RDONLY, None) != 0:
            return 4
        if lib.soperator_restrict_sessions(0, _err(), 512) != 0 or lib.soperator_restrict_import(_err(), 512) != 0:
            return 5
        a, b = str(tmp_path / "a").encode(), str(tmp_path / "b").encode()
        calls = {
            "new tmpfs": lambda: libc.mount(b"tmpfs", b, b"tmpfs", 0, None),
            "propagation": lambda: libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None),
            "remount rw": lambda: libc.mount(None, a, None, MS_REMOUNT | MS_BIND, None),
            "bind": lambda: libc.mount(a, b, None, MS_BIND, None),
            "move": lambda: libc.mount(a, b, None, 8192, None),  # MS_MOVE
            "umount2": lambda: libc.umount2(a, 0),
            "chroot": lambda: libc.chroot(b"/"),
            "pivot_root": lambda: libc.syscall(155, a, b),  # x86_64 numbers from here on
            "setns": lambda: libc.syscall(308, -1, 0),
            "open_tree": lambda: libc.syscall(428, -100, a, 1),
            "fsopen": lambda: libc.syscall(430, b"tmpfs", 0),
            "mount_setattr": lambda: libc.syscall(442, -100, a, 0, None, 0),
        }
        found = {}
        for name, call in calls.items():
            ctypes.set_errno(0)
            found[name] = 0 if call() == 0 else ctypes.get_errno()
        os.write(out, json.dumps(found).encode())
        return 0

    code, data = _in_child(child)
    assert code == 0, data
    found = json.loads(data)
    assert (found.pop("new tmpfs"), found.pop("propagation")) == (0, 0)
    assert found == {name: 1 for name in found}, found  # EPERM, each
