"""The FUSE device plugin's answers (soperator/fuse_device), as the kubelet decodes them, and the
worker's hand-over of the device to users. The plugin against the real kubelet:
tests/kube/test_fuse_device.py."""
from __future__ import annotations

import os
import stat

from soperator.fuse_device import api
from soperator.fuse_device.plugin import PluginConfig, allocate, device_list
from soperator.node.roles import closed_fuse, open_fuse_to_users


def test_every_device_is_healthy_while_the_node_has_dev_fuse_and_unhealthy_without(tmp_path):
    present = tmp_path / "fuse"
    present.touch()
    devices = device_list(PluginConfig(str(tmp_path), str(present), devices=3))
    assert [(d.ID, d.health) for d in devices] == [("fuse-0", "Healthy"), ("fuse-1", "Healthy"), ("fuse-2", "Healthy")]
    assert {d.health for d in device_list(PluginConfig(str(tmp_path), str(tmp_path / "none"), devices=3))} == {
        "Unhealthy"}


def test_each_container_gets_dev_fuse_read_write_and_no_mknod_whatever_ids_it_was_given(tmp_path):
    request = api.AllocateRequest()
    request.container_requests.add(devices_ids=["fuse-3"])
    request.container_requests.add(devices_ids=["fuse-0", "fuse-7"])
    wire = allocate(PluginConfig(str(tmp_path), "/host/dev/fuse"), api.AllocateRequest.FromString(
        request.SerializeToString())).SerializeToString()
    answer = api.AllocateResponse.FromString(wire)
    assert [[(d.container_path, d.host_path, d.permissions) for d in c.devices] for c in answer.container_responses] \
        == [[("/dev/fuse", "/dev/fuse", "rw")]] * 2


def test_the_kubelets_field_numbers():
    """The wire format is the kubelet's v1beta1 (api.proto): a field renumbered here would be read as
    another by the kubelet."""
    register = api.RegisterRequest(version="v1beta1", endpoint="soperator-fuse.sock", resource_name="soperator.dev/fuse")
    assert register.SerializeToString() == (b"\n\x07v1beta1\x12\x13soperator-fuse.sock\x1a\x12soperator.dev/fuse")
    spec = api.DeviceSpec(container_path="/a", host_path="/b", permissions="rw")
    assert spec.SerializeToString() == b"\n\x02/a\x12\x02/b\x1a\x02rw"
    response = api.AllocateResponse()
    response.container_responses.add().devices.add(container_path="/a")
    assert response.SerializeToString() == b"\n\x06\x1a\x04\n\x02/a"  # devices is field 3 of the container's answer
    listed = api.ListAndWatchResponse(devices=[api.Device(ID="x", health="Healthy")])
    assert listed.SerializeToString() == b"\n\x0c\n\x01x\x12\x07Healthy"


def test_the_worker_opens_its_own_dev_fuse_to_users_and_says_when_there_is_none(tmp_path):
    device = tmp_path / "fuse"
    assert open_fuse_to_users(str(device)) == f"no {device}"
    device.touch(mode=0o600)
    assert open_fuse_to_users(str(device)) == f"{device} open to users (squashfuse)"
    assert stat.S_IMODE(os.stat(device).st_mode) == 0o666


def test_a_user_namespaced_worker_refuses_a_node_fuse_closed_to_others_naming_the_node_and_mode():
    """In a user namespace the runtime binds the node's own /dev/fuse (runc cannot make device nodes
    there), owned by ids the pod does not map: only the mode's bits for others count."""
    assert closed_fuse("n1", "/dev/fuse", 0o666) is None
    assert closed_fuse("n1", "/dev/fuse", 0o606) is None
    for mode in (0o600, 0o660, 0o604):
        refusal = closed_fuse("n1", "/dev/fuse", mode)
        assert refusal.startswith(f"node n1: its /dev/fuse is mode {mode:04o}") and "mountImages" in refusal
