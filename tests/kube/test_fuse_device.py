"""/dev/fuse as a resource on the real node: `soperator fuse-device-plugin` (what the operator chart's
DaemonSet runs) registers with the real kubelet, the node offers `soperator.dev/fuse`, and a pod that
asks for it gets the device, unprivileged and with no capability, and may open it; a pod that does
not ask has none and cannot make one. When the plugin restarts it registers again; when it stops the
node's offer falls to zero and no new pod gets the device."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from soperator.fuse_device.plugin import SOCKET_NAME
from soperator.node.layout import FUSE_RESOURCE
from tests.cluster.node import NODE_NAME
from tests.support.wait import until
from tests.support_paths import ROOT
from tests.support.kube_report import namespace_report

pytestmark = pytest.mark.kube

PLUGIN_DIR = "/var/lib/kubelet/device-plugins"  # the kubelet's, whatever its --root-dir
DEVICES = 4
# The container's /dev/fuse is made by the runtime with the node's mode, which on this host is
# root-only (no udev rule): the check opens it as root with every capability dropped, as a worker's
# setup does before it hands the device on.
PROBE = ("import os; print(os.path.exists('/dev/fuse')); fd = os.open('/dev/fuse', os.O_RDWR); print('opened')")
MKNOD = "import os; os.mknod('/tmp/fuse', 0o20666, os.makedev(10, 229)); print('made')"


class Plugin:
    def __init__(self, log):
        self.log = log
        self.proc = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "soperator.cli", "fuse-device-plugin", f"--plugin-dir={PLUGIN_DIR}",
             "--host-device=/dev/fuse", f"--devices={DEVICES}"], cwd=ROOT, stdout=open(self.log, "a"),
            stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


@pytest.fixture
def plugin(node, tmp_path):
    running = Plugin(tmp_path / "plugin.log")
    running.start()
    yield running
    running.stop()
    socket = os.path.join(PLUGIN_DIR, SOCKET_NAME)
    assert not os.path.exists(socket) or running.proc.returncode != 0, "the plugin left its socket"


def _offered(kubectl) -> tuple[str, str]:
    status = json.loads(kubectl("get", "node", NODE_NAME, "-o", "json").stdout)["status"]
    return status.get("capacity", {}).get(FUSE_RESOURCE, "0"), status.get("allocatable", {}).get(FUSE_RESOURCE, "0")


def _pod(namespace: str, name: str, image: str, code: str, fuse: bool) -> str:
    container = {"name": "probe", "image": image, "imagePullPolicy": "Never", "command": ["python3", "-u", "-c", code],
                 "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False,
                                     "capabilities": {"drop": ["ALL"]}}}
    if fuse:
        container["resources"] = {"limits": {FUSE_RESOURCE: "1"}}
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                           "spec": {"restartPolicy": "Never", "containers": [container]}})


def _finished(kubectl, namespace: str, name: str) -> tuple[str, str]:
    def phase():
        pod = json.loads(kubectl("-n", namespace, "get", "pod", name, "-o", "json").stdout)
        return pod["status"].get("phase") in ("Succeeded", "Failed") and pod["status"]["phase"]
    try:
        result = until(phase, 120, f"pod {name} to finish", interval=1)
    except AssertionError as exc:  # why: the pod, its events, the node's (once seen in CI, not here)
        raise AssertionError(f"{exc}\n{namespace_report(kubectl, namespace, logs_of=(name,))}") from None
    return result, kubectl("-n", namespace, "logs", name, check=False).stdout


def test_a_pod_that_asks_gets_dev_fuse_unprivileged_and_no_other_does(plugin, node_image, kubectl, namespace):
    assert until(lambda: _offered(kubectl) == (str(DEVICES), str(DEVICES)), 60, "the node to offer the device"), \
        plugin.log.read_text()
    kubectl("apply", "-f", "-", input=_pod(namespace, "asks", node_image, PROBE, fuse=True))
    assert _finished(kubectl, namespace, "asks") == ("Succeeded", "True\nopened\n")

    kubectl("apply", "-f", "-", input=_pod(namespace, "plain", node_image, PROBE, fuse=False))
    phase, log = _finished(kubectl, namespace, "plain")
    assert phase == "Failed" and log.startswith("False\n") and "FileNotFoundError" in log
    # Without the device it cannot make one: no CAP_MKNOD, and the device cgroup would refuse it.
    kubectl("apply", "-f", "-", input=_pod(namespace, "mknod", node_image, MKNOD, fuse=False))
    phase, log = _finished(kubectl, namespace, "mknod")
    assert phase == "Failed" and "PermissionError" in log


def test_the_plugin_registers_again_after_a_restart_and_its_offer_goes_when_it_stops(plugin, kubectl):
    until(lambda: _offered(kubectl)[1] == str(DEVICES), 60, "the node to offer the device")
    plugin.stop()
    # The kubelet sees the plugin's stream end: nothing is allocatable any more (capacity lingers).
    until(lambda: _offered(kubectl)[1] == "0", 120, "the offer to fall to zero once the plugin stopped", interval=1)
    began = time.monotonic()
    plugin.start()
    until(lambda: _offered(kubectl)[1] == str(DEVICES), 60, "the offer back after the restart", interval=1)
    assert "registered soperator.dev/fuse" in plugin.log.read_text()
    print(f"offer back {time.monotonic() - began:.1f} s after the plugin restarted")
