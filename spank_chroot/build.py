"""Build the jail code twice through cffi: the SPANK plugin slurmd loads, and a Python binding.

`python -m spank_chroot.build [--binding-only | --plugin-only --out DIR]`:
- spank_chroot/_jail*.so: a cffi extension of the C files but plugin.c, so tests call them directly;
- spank_chroot/_build/spank_chroot.so: all of them compiled by the same compiler cffi drives
  (setuptools' ccompiler), a plain shared object with no Python in it. Its slurm_* symbols are
  resolved by slurmstepd when it loads the plugin. With it, pam_soperator_jail.so (pam_jail.c), the
  PAM module that puts login sessions into the jail (needs libpam's headers). slurmd refuses a plugin built for another Slurm
  release, so the plugin is built where the Slurm that loads it is: the node image's build stage
  (`--plugin-only`); the host builds the binding only.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import sysconfig
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
BUILD = HERE / "_build"
PLUGIN = BUILD / "spank_chroot.so"
# The jail code alone (no Slurm symbols), for the login node's entrypoint to load with ctypes.
JAIL_LIB = BUILD / "libsoperator_jail.so"
PAM_MODULE = BUILD / "pam_soperator_jail.so"
CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-fPIC"]

CDEF = """
#define SOPERATOR_SKIP 0
#define SOPERATOR_ENTER 1
#define SOPERATOR_REFUSE 2
int soperator_decide(int remote, uint32_t step_id, int argc, const char *const *argv, char *err,
                     size_t errlen);
int soperator_check_jail(const char *jail, char *err, size_t errlen);
int soperator_mask_proc(const char *proc, char *err, size_t errlen);
int soperator_enter_jail(const char *jail, char *err, size_t errlen);
struct soperator_bind { const char *source; const char *target; };
int soperator_enter_jail_with(const char *jail, const struct soperator_bind *binds, size_t nbinds, char *err,
                              size_t errlen);
const char *soperator_option(int argc, const char *const *argv, const char *prefix);
int soperator_job_dir(const char *base, uint32_t job_id, char *path, size_t pathlen, char *err, size_t errlen);
int soperator_remove_job_dir(const char *base, uint32_t job_id, char *err, size_t errlen);
int soperator_allows_userns(int argc, const char *const *argv);
int soperator_restrict_task(int allow_userns, char *err, size_t errlen);
int soperator_read_only_cgroups(const char *root, char *err, size_t errlen);
int soperator_remount_read_only_under(const char *root, char *err, size_t errlen);
int soperator_restrict_sessions(int allow_userns, char *err, size_t errlen);
int soperator_restrict_import(char *err, size_t errlen);
int soperator_enter_session(const char *jail, char *err, size_t errlen);
int soperator_read_user_dirs(const char *file, char *buf, size_t buflen, char *err, size_t errlen);
int soperator_user_dir_template_ok(const char *line);
int soperator_user_dir(const char *path, uint32_t uid, uint32_t gid, char *err, size_t errlen);
int soperator_user_dirs(const char *list, uint32_t uid, uint32_t gid, char *err, size_t errlen);
"""
# The C files with no Slurm symbols (all but plugin.c): the binding, and the plain library the login
# node loads.
SOURCES = ("cgroup_view.c", "fail.c", "jail.c", "job_dirs.c", "proc_mask.c", "restrict.c", "user_dirs.c")


def binding_ffi() -> FFI:
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source("spank_chroot._jail", '#include "jail.h"\n#include "job_dirs.h"\n#include "user_dirs.h"', sources=[str(HERE / name) for name in SOURCES],
                   include_dirs=[str(HERE)], extra_compile_args=CFLAGS)
    return ffi


def _compiler():
    # The compiler object cffi itself builds extensions with (setuptools' distutils).
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    return compiler


def build_plugin(out: Path = BUILD) -> Path:
    """The plugin and the plain jail library, into `out`."""
    if not Path("/usr/include/slurm/spank.h").exists():
        raise SystemExit("error: slurm/spank.h not found: install libslurm-dev")
    out.mkdir(parents=True, exist_ok=True)
    compiler = _compiler()
    objects = compiler.compile([str(HERE / name) for name in (*SOURCES, "plugin.c")], output_dir=str(out),
                               include_dirs=[str(HERE)], extra_postargs=CFLAGS)
    compiler.link_shared_object(objects, str(out / PLUGIN.name), extra_postargs=["-shared", "-Wl,-z,relro"])
    jail_objects = [o for o in objects if Path(o).stem != "plugin"]
    compiler.link_shared_object(jail_objects, str(out / JAIL_LIB.name), extra_postargs=["-shared", "-Wl,-z,relro"])
    if not Path("/usr/include/security/pam_modules.h").exists():
        raise SystemExit("error: security/pam_modules.h not found: install libpam0g-dev")
    pam = compiler.compile([str(HERE / "pam_jail.c")], output_dir=str(out), include_dirs=[str(HERE)],
                           extra_postargs=CFLAGS)
    compiler.link_shared_object(pam + jail_objects, str(out / PAM_MODULE.name), libraries=["pam"],
                                extra_postargs=["-shared", "-Wl,-z,relro"])
    return out / PLUGIN.name


def build_binding() -> Path:
    ffi = binding_ffi()
    built = ffi.compile(tmpdir=str(BUILD), verbose=False)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = HERE / f"_jail{suffix}"
    shutil.copyfile(built, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--binding-only", action="store_true", help="the cffi extension, for the tests")
    which.add_argument("--plugin-only", action="store_true", help="the plugin, libsoperator_jail.so and the PAM module")
    parser.add_argument("--out", metavar="DIR", type=Path, default=BUILD, help="where the plugin goes")
    args = parser.parse_args(argv)
    if args.plugin_only:
        print(f"plugin: {build_plugin(args.out)}")
    else:
        print(f"binding: {build_binding()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
