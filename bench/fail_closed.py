"""Why the plugin guards twice: what Slurm does with a job whose jail is missing, with the plugin as
shipped and with a variant that has only the first guard (init_post_opt fails; tasks are not stopped).

  python -m bench.fail_closed

Builds the variant in a throwaway container of the node images' Debian base (the image's Slurm headers), then runs
a batch job and an srun step on each, in the node image's Slurm. Prints job state, exit code and
whether the step's files appeared on the node's own root. A measurement, not a test: the shipped
plugin's behaviour is tested in tests/spank/test_slurmd_jail.py.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from images.build import BASE, ROOT, build_all, ensure_base
from images.podman import podman
from soperator.keys import generate_munge_key
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from tests.conftest import make_cluster
from tests.support.slurm import SlurmSandbox

NODE = "demo-worker-0"
BUILD = ("rm -f /etc/apt/sources.list && apt-get update -qq && apt-get install -y -qq --no-install-recommends "
         "gcc libc6-dev libpam0g-dev libslurm-dev python3-cffi python3-setuptools >/dev/null && cd /build "
         "&& python3 -m spank_chroot.build --plugin-only --out /build/out")


def first_guard_only(work: Path) -> Path:
    src = work / "spank_chroot"
    shutil.copytree(ROOT / "spank_chroot", src, ignore=shutil.ignore_patterns("_build", "_jail*", "__pycache__"))
    plugin_c = src / "plugin.c"
    text = plugin_c.read_text()
    assert "    _exit(REFUSED_EXIT);\n}" in text
    plugin_c.write_text(text.replace("    _exit(REFUSED_EXIT);\n}", "    return ESPANK_SUCCESS;\n}"))
    ensure_base()
    podman("run", "--rm", "-v", f"{work}:/build", "-v",
           f"{ROOT / 'images' / 'common' / 'debian.sources'}:/etc/apt/sources.list.d/debian.sources:ro",
           "-v", f"{ROOT / 'images' / 'common' / 'apt-preferences'}:/etc/apt/preferences.d/soperator:ro",
           "--entrypoint", "sh", BASE, "-c", BUILD, timeout=900)
    return work / "out" / "spank_chroot.so"


def run(label: str, plugin: Path | None, work: Path) -> None:
    cluster = make_cluster(nodeSets=[{"name": "worker", "replicas": 1}], slurmConfig={
        "proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
        "extra": {"SchedulerParameters": "batch_sched_delay=0"}})
    with SlurmSandbox(work / "box", slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                      names=[NODE], slurmd=NODE, jail=work / "no-such-jail", node_conf=worker_node_conf(cluster.spec.node_sets[0]),
                      mounts={"/opt/soperator/lib/spank_chroot.so": plugin} if plugin else None) as box:
        if not box.status["ready"]:
            raise SystemExit(f"sandbox not ready: {box.status}")
        job = box.run("sh", "-c", "cd /tmp && sbatch --parsable -o /tmp/out-%j --wrap 'touch /tmp/batch-ran'")
        fields = box.wait_job(job.stdout.strip())
        step = box.run("srun", "-N1", "--chdir=/tmp", "touch", "/tmp/srun-ran")
        ran = sorted(set(box.run("ls", "/tmp").stdout.split()) & {"batch-ran", "srun-ran"})
        print(f"{label}: batch {fields.get('JobState')} {fields.get('ExitCode')}, srun exit {step.returncode}, "
              f"ran on the node's root: {', '.join(ran) or 'nothing'}")


def main() -> int:
    build_all(only=["node"])
    with tempfile.TemporaryDirectory(prefix="soperator-fail-closed-") as tmp:
        variant = first_guard_only(Path(tmp) / "variant")
        run("shipped (both guards)", None, Path(tmp) / "shipped")
        run("first guard only", variant, Path(tmp) / "variant-run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
