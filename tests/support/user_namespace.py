"""Checks shared by the tests of user-namespaced workers (nodeSets[].hostUsers: false), on either
kernel: root's step, container jobs, and the cgroup delegate's log."""
from __future__ import annotations

from pathlib import Path

from tests.support.enroot_host import bookworm_image, import_podman_image

# Root's step says who it is in its namespace, how the pod's ids map onto the node's, which system the
# jail is, and whether it can reach two of the node's kernel interfaces.
ROOT_STEP = ("id -u; cat /proc/self/uid_map; head -1 /etc/os-release; "
             "[ -w /proc/sys/kernel/core_pattern ] && echo core-pattern-writable; "
             "(echo h > /proc/sysrq-trigger) 2>&1; true")
DELEGATE_SELECTOR = "app.kubernetes.io/name=soperator-cgroup-delegate"


def root_step_is_unprivileged(login, worker: str) -> tuple[int, str]:
    """Root's step on `worker` is root in the pod's user namespace only (ids 0-65535 mapped onto a range
    above every host user's) and writes neither `core_pattern` nor `sysrq-trigger`; returns the pod's
    first node id and the first line of the step's /etc/os-release."""
    out = login.run(f"srun -w {worker} sh -c '{ROOT_STEP}'")
    lines = out.splitlines()
    assert lines[0] == "0", out
    inside, first_host, length = (int(v) for v in lines[1].split())
    assert inside == 0 and length == 65536 and first_host >= 65536, out
    assert "core-pattern-writable" not in out and "sysrq-trigger" in lines[3], out
    return first_host, lines[2]


def delegated(kubectl, namespace: str, worker: str, container_id: str, uid: int, *selectors: str) -> None:
    """The cgroup delegate's pods (narrowed by kubectl `selectors`) logged the worker's container as
    given to `uid`."""
    pods = kubectl("-n", namespace, "get", "pods", "-l", DELEGATE_SELECTOR, *selectors, "-o", "name").stdout.split()
    log = kubectl("-n", namespace, "logs", *pods).stdout
    cid = container_id.split("://", 1)[-1]
    assert f"{namespace}/{worker} (container {cid[:12]}): cgroups delegated to uid {uid} gid {uid}" in log, log


def image_in_jail(jail: Path, workdir: Path) -> str:
    """A Debian 12 `.sqsh` (the jail is 13) in the jail, readable by all; its path in the jail."""
    image = jail / "opt" / "bookworm.sqsh"
    import_podman_image(bookworm_image(workdir), image, workdir)
    image.chmod(0o644)
    return "/opt/bookworm.sqsh"


def container_jobs_run(login, worker: str, image: str, user: str, uid: int, more: str = "true") -> list[str]:
    """Root's container job, the user's, and the user's with --container-remap-root, from `image` on
    `worker`: each runs the image's system as the id it should have inside (root's enroot maps to
    root). Returns what `more` printed in each."""
    seen = []
    for who, flags, inside in (("root", "", "0"), (user, "", str(uid)), (user, "--container-remap-root", "0")):
        shown = login.run(f"cd /tmp && runuser -u {who} -- srun -w {worker} --container-image={image} {flags} "
                          f"sh -c 'id -u; grep ^VERSION_ID= /etc/os-release; {more}'").splitlines()
        assert shown[:2] == [inside, 'VERSION_ID="12"'], (who, flags, shown)
        seen.append("\n".join(shown[2:]))
    return seen
