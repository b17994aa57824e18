"""populate-jail: copy a root filesystem into the (shared) jail volume, once, without losing user data.

- A fill writes the sentinel `.soperator/populated` LAST, so a fill that was killed midway is
  detected (no sentinel) and simply run again: copying is idempotent.
- Once populated, a re-run with overwrite off changes nothing.
- overwrite on replaces the system files from the image but never touches user data (USER_DATA and
  whatever `SOPERATOR_POPULATE_KEEP` lists); files the image does not have are never deleted.
- The jail root ends root-owned, mode 0755: sshd's ChrootDirectory requires it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import time

SENTINEL_DIR = ".soperator"
SENTINEL = f"{SENTINEL_DIR}/populated"
# Once a jail exists these belong to its users; account files hold the users they added.
USER_DATA = ("home", "root", "tmp", "var/tmp", "opt/user", "etc/passwd", "etc/group", "etc/shadow",
             "etc/gshadow")


def _is_user_data(rel: str, keep: tuple[str, ...]) -> bool:
    return any(rel == k or rel.startswith(k + "/") for k in keep)


def _copy_entry(src: str, dst: str, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        if os.path.lexists(dst):
            if os.path.islink(dst) and os.readlink(dst) == os.readlink(src):
                return
            _remove(dst)
        os.symlink(os.readlink(src), dst)
        os.lchown(dst, st.st_uid, st.st_gid)
        return
    if stat.S_ISDIR(st.st_mode):
        if os.path.lexists(dst) and not os.path.isdir(dst) or os.path.islink(dst):
            _remove(dst)
        os.makedirs(dst, exist_ok=True)
    elif stat.S_ISREG(st.st_mode):
        if os.path.lexists(dst) and (os.path.isdir(dst) and not os.path.islink(dst)):
            _remove(dst)
        tmp = f"{dst}.soperator-tmp"
        shutil.copyfile(src, tmp, follow_symlinks=False)
        os.replace(tmp, dst)
    else:
        # Device nodes, fifos and sockets have no place in a shared jail image: /dev is bound at run time.
        return
    os.lchown(dst, st.st_uid, st.st_gid)
    os.chmod(dst, stat.S_IMODE(st.st_mode))


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _same_file(dst: str, st: os.stat_result) -> bool:
    try:
        dst_st = os.lstat(dst)
    except FileNotFoundError:
        return False
    return (stat.S_IFMT(dst_st.st_mode) == stat.S_IFMT(st.st_mode) and dst_st.st_size == st.st_size
            and dst_st.st_mtime_ns == st.st_mtime_ns)


def copy_tree(source: str, target: str, keep: tuple[str, ...], overwrite_existing: bool) -> dict:
    """Copy source into target. User-data paths that already exist are never touched."""
    counts = {"copied": 0, "kept": 0, "skipped": 0}
    for dirpath, dirnames, filenames in os.walk(source):
        rel_dir = os.path.relpath(dirpath, source)
        rel_dir = "" if rel_dir == "." else rel_dir
        for name in sorted(dirnames) + sorted(filenames):
            rel = os.path.join(rel_dir, name)
            src, dst = os.path.join(source, rel), os.path.join(target, rel)
            st = os.lstat(src)
            if _is_user_data(rel, keep) and os.path.lexists(dst):
                counts["kept"] += 1
                if name in dirnames:
                    dirnames.remove(name)
                continue
            if stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode):
                _copy_entry(src, dst, st)
                continue
            if os.path.lexists(dst) and (not overwrite_existing or _same_file(dst, st)):
                counts["skipped"] += 1
                continue
            _copy_entry(src, dst, st)
            if stat.S_ISREG(st.st_mode):
                os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
            counts["copied"] += 1
    return counts


def populate(source: str, target: str, overwrite: bool, keep: tuple[str, ...] = USER_DATA) -> dict:
    sentinel = os.path.join(target, SENTINEL)
    if os.path.exists(sentinel) and not overwrite:
        return {"action": "skipped", "reason": f"{SENTINEL} present and overwrite is off"}
    started = time.monotonic()
    # An interrupted first fill left no sentinel: files already there are from our own image, so
    # replacing them is safe; after a finished fill only overwrite=true replaces system files.
    counts = copy_tree(source, target, keep, overwrite_existing=True)
    os.chown(target, 0, 0)
    os.chmod(target, 0o755)
    os.makedirs(os.path.join(target, SENTINEL_DIR), mode=0o755, exist_ok=True)
    tmp = sentinel + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"finished": time.time(), "source": source, "overwrite": overwrite}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, sentinel)
    return {"action": "populated", "seconds": round(time.monotonic() - started, 3), **counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fill the jail volume from a root filesystem")
    parser.add_argument("--source", default=os.environ.get("SOPERATOR_JAIL_SOURCE", "/jail-rootfs"))
    parser.add_argument("--target", default=os.environ.get("SOPERATOR_JAIL", "/jail"))
    parser.add_argument("--overwrite", action="store_true",
                        default=os.environ.get("SOPERATOR_POPULATE_OVERWRITE", "false") == "true")
    args = parser.parse_args(argv)
    for path, what in ((args.source, "source root filesystem"), (args.target, "jail volume")):
        if not os.path.isdir(path):
            print(f"populate-jail: {what} {path} is not a directory", file=sys.stderr)
            return 2
    extra = tuple(p.strip("/") for p in os.environ.get("SOPERATOR_POPULATE_KEEP", "").split(":") if p.strip("/"))
    result = populate(args.source, args.target, args.overwrite, USER_DATA + extra)
    print(json.dumps({"populate-jail": result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
