"""Build the jail code twice through cffi: the SPANK plugin slurmd loads, and a Python binding.

`python -m spank_chroot.build [--install DIR]`:
- spank_chroot/_jail*.so: a cffi extension of jail.c, so tests call the C functions directly;
- spank_chroot/_build/spank_chroot.so: plugin.c + jail.c compiled by the same compiler cffi drives
  (setuptools' ccompiler), a plain shared object with no Python in it. Its slurm_* symbols are
  resolved by slurmstepd when it loads the plugin.
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
# jail.c alone (no Slurm symbols), for the login node's entrypoint to load with ctypes.
JAIL_LIB = BUILD / "libsoperator_jail.so"
CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-fPIC"]

CDEF = """
#define SOPERATOR_SKIP 0
#define SOPERATOR_ENTER 1
#define SOPERATOR_REFUSE 2
int soperator_decide(int remote, uint32_t step_id, int argc, const char *const *argv, char *err,
                     size_t errlen);
int soperator_check_jail(const char *jail, char *err, size_t errlen);
int soperator_enter_jail(const char *jail, char *err, size_t errlen);
int soperator_allows_userns(int argc, const char *const *argv);
int soperator_restrict_task(int allow_userns, char *err, size_t errlen);
int soperator_restrict_sessions(int allow_userns, char *err, size_t errlen);
"""


def binding_ffi() -> FFI:
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source("spank_chroot._jail", '#include "jail.h"', sources=[str(HERE / "jail.c")],
                   include_dirs=[str(HERE)], extra_compile_args=CFLAGS)
    return ffi


def _compiler():
    # The compiler object cffi itself builds extensions with (setuptools' distutils).
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    return compiler


def build_plugin() -> Path:
    if not Path("/usr/include/slurm/spank.h").exists():
        raise SystemExit("error: slurm/spank.h not found: install libslurm-dev")
    BUILD.mkdir(exist_ok=True)
    compiler = _compiler()
    objects = compiler.compile([str(HERE / "jail.c"), str(HERE / "plugin.c")], output_dir=str(BUILD),
                               include_dirs=[str(HERE)], extra_postargs=CFLAGS)
    compiler.link_shared_object(objects, str(PLUGIN), extra_postargs=["-shared", "-Wl,-z,relro"])
    compiler.link_shared_object([o for o in objects if Path(o).stem == "jail"], str(JAIL_LIB),
                                extra_postargs=["-shared", "-Wl,-z,relro"])
    return PLUGIN


def build_binding() -> Path:
    ffi = binding_ffi()
    built = ffi.compile(tmpdir=str(BUILD), verbose=False)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = HERE / f"_jail{suffix}"
    shutil.copyfile(built, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--install", metavar="DIR", help="also copy the plugin into DIR")
    args = parser.parse_args(argv)
    plugin, binding = build_plugin(), build_binding()
    print(f"plugin:  {plugin}\nbinding: {binding}")
    if args.install:
        Path(args.install).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(plugin, Path(args.install) / PLUGIN.name)
        print(f"installed {Path(args.install) / PLUGIN.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
