"""Container images mounted, not unpacked (spec.plugStack.pyxis.mountImages), on real slurmd 26.05,
Pyxis and enroot in the jail: the Pyxis worker asks for soperator.dev/fuse, which a kubelet turns
into /dev/fuse through the operator chart's device plugin (here the e2e's stand-in does the same);
Pyxis starts a squashfs image through squashfuse under a kernel overlay, as the user. Nothing is
unpacked on the node; writes go to the overlay's upper layer in memory and go with the step; named
containers are still made (unpacked) and reused; a node set without Pyxis has no /dev/fuse."""
from __future__ import annotations

import shutil

import pytest

from tests.e2e.test_containers_e2e import sqsh  # noqa: F401 - the module's image fixture
from tests.support.e2e_cluster import running, start_with_sessions
from tests.support.ssh_session import run as _run
from tests.support.wait import until as _wait

pytestmark = pytest.mark.e2e
NODE_SETS = [{"name": "box", "replicas": 1, "pyxis": {"enabled": True}}, {"name": "cpu", "replicas": 1}]
IMAGE = "/home/alice/bookworm.sqsh"


@pytest.fixture
def cluster(images, tmp_path):
    yield from running(tmp_path, nodeSets=NODE_SETS, plugStack={"pyxis": {"mountImages": True}})


@pytest.fixture
def users(cluster, sqsh):  # noqa: F811 - the fixture imported above
    """The cluster up, alice's image in her jail home; alice's and bob's ssh sessions on the login node."""
    assert cluster.populate("first")["action"] == "populated"
    sessions = start_with_sessions(cluster, ["box", "cpu"], {"alice": 1000, "bob": 1001})
    shutil.copy(sqsh, cluster.jail / "home" / "alice" / "bookworm.sqsh")
    shutil.chown(cluster.jail / "home" / "alice" / "bookworm.sqsh", 1000, 1000)
    yield sessions
    for client in sessions.values():
        client.close()


def test_a_squashfs_image_is_mounted_for_each_user_and_nothing_is_unpacked(cluster, users):
    alice, bob = users["alice"], users["bob"]
    # Only the Pyxis worker has the device, open to users; the plain one has none.
    assert cluster.exec("e2e-box-0", "stat", "-c", "%a %t:%T", "/dev/fuse").split() == ["666", "a:e5"]
    assert cluster.exec("e2e-cpu-0", "sh", "-c", "test -e /dev/fuse && echo yes || echo no").strip() == "no"

    # The step's root is the overlay over the mounted image (unpacked, it is the volume's own file system).
    code, out, err = _run(alice, f"srun -w e2e-box-0 --container-image={IMAGE} sh -c "
                                 "'grep ^VERSION_ID= /etc/os-release; stat -f -c %T /'", timeout=120)
    assert (code, out.split()) == (0, ['VERSION_ID="12"', "overlayfs"]), err
    # No unpacked root, for this step or any: enroot's data directory for alice holds nothing.
    data = cluster.exec("e2e-box-0", "sh", "-c", "ls -A /run/enroot/user-1000/data 2>/dev/null | wc -l")
    assert data.strip() == "0"

    # Bob starts alice's image (she made it readable) at the same time as she does: one file, two mounts.
    code, _, err = _run(alice, f"chmod 755 ~ && chmod 644 {IMAGE}")
    assert code == 0, err
    launch = (f"srun -w e2e-box-0 --container-image={IMAGE} --container-writable sh -c "
              "'echo $(id -un) > /who; cat /who; sleep 8; cat /who'")
    started = {user: client.exec_command(launch, timeout=180) for user, client in (("alice", alice), ("bob", bob))}
    # While they run (at once where the node has the CPUs): a squashfuse of each user's on the worker,
    # and, while it runs, no unpacked copy in that user's enroot data.
    seen: dict[str, str] = {}

    def look() -> bool:
        running = cluster.exec("e2e-box-0", "ps", "-eo", "uid=,comm=").split("\n")
        for uid in {line.split()[0] for line in running if line.split()[1:] == ["squashfuse"]}:
            seen[uid] = cluster.exec("e2e-box-0", "sh", "-c", f"ls -A /run/enroot/user-{uid}/data | wc -l").strip()
        return set(seen) == {"1000", "1001"}
    _wait(look, 90, "alice's and bob's squashfuse", interval=0.5)
    assert seen == {"1000": "0", "1001": "0"}
    outputs = {user: streams[1].read().decode().split() for user, streams in started.items()}
    assert outputs == {"alice": ["alice", "alice"], "bob": ["bob", "bob"]}, outputs

    # Writes land in the step's own upper layer: the next step sees a pristine image.
    code, out, err = _run(alice, f"srun -w e2e-box-0 --container-image={IMAGE} sh -c 'test -e /who && echo kept "
                                 "|| echo fresh'", timeout=120)
    assert (code, out.strip()) == (0, "fresh"), err
    # Read-only when asked.
    code, out, err = _run(alice, f"srun -w e2e-box-0 --container-image={IMAGE} --container-readonly sh -c "
                                 "'touch /x 2>&1 || echo refused'", timeout=120)
    assert code == 0 and out.strip().endswith("refused"), (out, err)

    # A named container is made (unpacked) once and reused, as without mounting.
    code, _, err = _run(alice, f"srun -w e2e-box-0 --container-image={IMAGE} --container-name=keep "
                               "--container-writable sh -c 'echo from-the-first-step > /marker'", timeout=120)
    assert code == 0, err
    code, out, err = _run(alice, "srun -w e2e-box-0 --container-name=keep --container-writable cat /marker",
                          timeout=120)
    assert (code, out.strip()) == (0, "from-the-first-step"), err
    assert cluster.exec("e2e-box-0", "ls", "/run/enroot/user-1000/data").split() == ["pyxis_keep"]
    # Nothing is left mounted on the worker once the steps ended: no squashfuse process of anyone.
    _wait(lambda: cluster.exec("e2e-box-0", "sh", "-c", "ps -eo comm= | grep -c squashfuse || true").strip() == "0",
          30, "no squashfuse left once the steps ended")
