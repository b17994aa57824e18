"""populate-jail: copy a root filesystem into the (shared) jail volume, once, without losing user data.

- A fill writes `.soperator/filling` first and the sentinel `.soperator/populated` LAST, so a fill
  that was killed midway is detected (no sentinel) and simply run again: copying is idempotent.
- A volume that holds files but neither marker is not ours: it is refused unless overwrite is on.
- The volume is writable by the jail's users while this runs as root: no write ever follows a
  symlink in the target (see copy_tree).
- Once populated, a re-run with overwrite off changes nothing.
- overwrite on replaces the system files from the image but never touches user data (USER_DATA and
  whatever `SOPERATOR_POPULATE_KEEP` lists); files the image does not have are never deleted.
- The jail root ends root-owned, mode 0755: it becomes every job step's and login session's `/`.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import stat
import sys
import time

from .layout import ENV, PATHS

SENTINEL = PATHS.populated
SENTINEL_DIR = os.path.dirname(SENTINEL)
FILLING = f"{SENTINEL_DIR}/filling"
# Once a jail exists these belong to its users; account files hold the users they added.
USER_DATA = ("home", "root", "tmp", "var/tmp", "opt/user", "etc/passwd", "etc/group", "etc/shadow",
             "etc/gshadow")


def _is_user_data(rel: str, keep: tuple[str, ...]) -> bool:
    return any(rel == k or rel.startswith(k + "/") for k in keep)


# Opening a directory this way fails (ELOOP/ENOTDIR) if a user swapped it for a symlink meanwhile.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _remove_at(dir_fd: int, name: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)  # rmtree's fd-based walk does not follow links either
    else:
        os.unlink(name, dir_fd=dir_fd)


def _same_file(dst: os.stat_result | None, st: os.stat_result) -> bool:
    return (dst is not None and stat.S_IFMT(dst.st_mode) == stat.S_IFMT(st.st_mode)
            and dst.st_size == st.st_size and dst.st_mtime_ns == st.st_mtime_ns)


def _replace_at(dir_fd: int, name: str, mode: int, fill, existing: os.stat_result | None) -> None:
    """Write `name` by way of a fresh temporary name (O_EXCL|O_NOFOLLOW: a planted file or link there
    fails the open instead of being written through): fill(fd) writes it, then it is renamed over
    whatever `existing` was (a directory is removed first: rename cannot replace one)."""
    tmp = f".{name}.soperator-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        fill(fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    finally:
        os.close(fd)
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        _remove_at(dir_fd, name, existing)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _write_file(src: str, dir_fd: int, name: str, st: os.stat_result, existing: os.stat_result | None) -> None:
    """A copy of src, with owner, mode and times set on the fd before it takes the name."""
    def fill(fd: int) -> None:
        with open(src, "rb") as source, os.fdopen(fd, "wb", closefd=False) as out:
            shutil.copyfileobj(source, out, 1 << 20)
        os.fchown(fd, st.st_uid, st.st_gid)
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))

    _replace_at(dir_fd, name, 0o600, fill, existing)


def _write_link(src: str, dir_fd: int, name: str, st: os.stat_result, existing: os.stat_result | None) -> None:
    link = os.readlink(src)
    if existing is not None:
        if stat.S_ISLNK(existing.st_mode) and os.readlink(name, dir_fd=dir_fd) == link:
            return
        _remove_at(dir_fd, name, existing)
    os.symlink(link, name, dir_fd=dir_fd)
    os.chown(name, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=False)


def _dir_at(dir_fd: int, name: str, existing: os.stat_result | None, mode: int = 0o700) -> int:
    """Open `name` as a real directory, made if absent; a file or symlink planted there is removed."""
    if existing is not None and not stat.S_ISDIR(existing.st_mode):
        _remove_at(dir_fd, name, existing)
        existing = None
    if existing is None:
        os.mkdir(name, mode, dir_fd=dir_fd)
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _open_dir(dir_fd: int, name: str, st: os.stat_result, existing: os.stat_result | None) -> int:
    child = _dir_at(dir_fd, name, existing)
    os.fchown(child, st.st_uid, st.st_gid)
    os.fchmod(child, stat.S_IMODE(st.st_mode))
    return child


def _copy_dir(source: str, rel_dir: str, dir_fd: int, keep: tuple[str, ...], overwrite_existing: bool,
              counts: dict) -> None:
    with os.scandir(os.path.join(source, rel_dir)) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        rel = os.path.join(rel_dir, entry.name)
        st = entry.stat(follow_symlinks=False)
        existing = _lstat_at(dir_fd, entry.name)
        if existing is not None and _is_user_data(rel, keep):
            counts["kept"] += 1
            continue
        if stat.S_ISDIR(st.st_mode):
            child = _open_dir(dir_fd, entry.name, st, existing)
            try:
                _copy_dir(source, rel, child, keep, overwrite_existing, counts)
            finally:
                os.close(child)
            continue
        if existing is not None and (not overwrite_existing or _same_file(existing, st)):
            counts["skipped"] += 1
            continue
        if stat.S_ISLNK(st.st_mode):
            _write_link(entry.path, dir_fd, entry.name, st, existing)
        elif stat.S_ISREG(st.st_mode):
            _write_file(entry.path, dir_fd, entry.name, st, existing)
        else:
            # Device nodes, fifos and sockets have no place in a shared jail image: /dev is bound at run time.
            continue
        counts["copied"] += 1


def copy_tree(source: str, target: str, keep: tuple[str, ...], overwrite_existing: bool) -> dict:
    """Copy source into target. User-data paths that already exist are never touched.

    The jail is writable by its users while this runs as root, so every write goes through a
    directory fd opened with O_NOFOLLOW, relative to it (dir_fd): no path in the target is ever
    resolved through a symlink, wherever one is planted."""
    counts = {"copied": 0, "kept": 0, "skipped": 0}
    root_fd = os.open(target, _DIR_FLAGS)
    try:
        _copy_dir(source, "", root_fd, keep, overwrite_existing, counts)
    finally:
        os.close(root_fd)
    return counts


def _write_marker(root_fd: int, name: str, body: dict) -> None:
    """Write `.soperator/<name>` atomically, never through a link a user planted."""
    marker_dir = _dir_at(root_fd, SENTINEL_DIR, _lstat_at(root_fd, SENTINEL_DIR), 0o755)

    def fill(fd: int) -> None:
        os.write(fd, json.dumps(body).encode())
        os.fsync(fd)

    try:
        _replace_at(marker_dir, name, 0o644, fill, _lstat_at(marker_dir, name))
    finally:
        os.close(marker_dir)


def _foreign_entries(target: str) -> list[str]:
    """What a volume holds besides our markers and a filesystem's lost+found."""
    return sorted(set(os.listdir(target)) - {SENTINEL_DIR, "lost+found"})


def populate(source: str, target: str, overwrite: bool, keep: tuple[str, ...] = USER_DATA) -> dict:
    sentinel = os.path.join(target, SENTINEL)
    if os.path.lexists(sentinel) and not overwrite:
        return {"action": "skipped", "reason": f"{SENTINEL} present and overwrite is off"}
    foreign = _foreign_entries(target)
    # (With overwrite off, a sentinel would have returned above.)
    if foreign and not overwrite and not os.path.lexists(os.path.join(target, FILLING)):
        return {"action": "refused", "reason": f"the jail volume holds files that soperator did not write "
                f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}) and no {SENTINEL}: refusing to "
                "write over them; set populateJail.overwrite to fill it anyway (user data is still kept)"}
    started = time.monotonic()
    root_fd = os.open(target, _DIR_FLAGS)
    try:
        # The marker that a fill of ours began: a fill killed midway is then completed by the next
        # run, replacing the files it wrote (they are from our own image).
        _write_marker(root_fd, os.path.basename(FILLING), {"started": time.time(), "source": source})
        counts = copy_tree(source, target, keep, overwrite_existing=True)
        os.fchown(root_fd, 0, 0)
        os.fchmod(root_fd, 0o755)
        _write_marker(root_fd, os.path.basename(SENTINEL),
                      {"finished": time.time(), "source": source, "overwrite": overwrite})
    finally:
        os.close(root_fd)
    return {"action": "populated", "seconds": round(time.monotonic() - started, 3), **counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fill the jail volume from a root filesystem")
    parser.add_argument("--source", default=os.environ.get(ENV.jail_source, PATHS.jail_source))
    parser.add_argument("--target", default=os.environ.get(ENV.jail, PATHS.populate_target))
    parser.add_argument("--overwrite", action="store_true",
                        default=os.environ.get(ENV.populate_overwrite, "false") == "true")
    args = parser.parse_args(argv)
    for path, what in ((args.source, "source root filesystem"), (args.target, "jail volume")):
        if not os.path.isdir(path):
            print(f"populate-jail: {what} {path} is not a directory", file=sys.stderr)
            return 2
    extra = tuple(p.strip("/") for p in os.environ.get(ENV.populate_keep, "").split(":") if p.strip("/"))
    result = populate(args.source, args.target, args.overwrite, USER_DATA + extra)
    print(json.dumps({"populate-jail": result}), flush=True)
    if result["action"] == "refused":
        print(f"populate-jail: {result['reason']}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
