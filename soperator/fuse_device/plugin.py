"""The operator chart's FUSE device plugin: it makes `/dev/fuse` a resource the kubelet hands to the
pods that ask for it (`soperator.dev/fuse`), and to no other. The kubelet then has the runtime create
the device node in the container and allow it in the container's device cgroup, so a pod gets FUSE
without privilege: Pyxis node sets mount container images with squashfuse instead of unpacking them.

/dev/fuse is shared, not consumed: the plugin lists `devices` interchangeable IDs, each a pod's
ticket to the same node. It is healthy while the node has the device (the plugin sees the host's
through a hostPath volume). The kubelet forgets plugins when it restarts and removes their sockets:
the plugin serves again and registers again when its socket goes or the kubelet's changes."""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from concurrent import futures
from dataclasses import dataclass

import grpc

from soperator.fuse_device import api
from soperator.node.layout import FUSE_DEVICE, FUSE_RESOURCE

log = logging.getLogger("soperator.fuse_device")

SOCKET_NAME = "soperator-fuse.sock"
KUBELET_SOCKET = "kubelet.sock"
# Read and write only: no mknod, the node is made for the container by the runtime.
PERMISSIONS = "rw"
CHECK_SECONDS = 5.0


@dataclass(frozen=True)
class PluginConfig:
    plugin_dir: str  # the kubelet's device-plugins directory, as this pod sees it
    host_device: str  # where this pod sees the node's /dev/fuse (health)
    devices: int = 64  # pods per node that may hold /dev/fuse at once
    node_device: str = FUSE_DEVICE  # its path on the node, which the runtime opens


def device_list(config: PluginConfig) -> list:
    health = api.HEALTHY if os.path.exists(config.host_device) else api.UNHEALTHY
    return [api.Device(ID=f"fuse-{i}", health=health) for i in range(config.devices)]


def allocate(config: PluginConfig, request) -> object:
    """One /dev/fuse per container, whatever IDs it was given (they all stand for the same device)."""
    response = api.AllocateResponse()
    for _ in request.container_requests:
        container = response.container_responses.add()
        container.devices.add(container_path=FUSE_DEVICE, host_path=config.node_device, permissions=PERMISSIONS)
    return response


class _Servicer:
    def __init__(self, config: PluginConfig, stopping: threading.Event):
        self.config, self.stopping = config, stopping

    def options(self, request, context):
        return api.DevicePluginOptions()

    def list_and_watch(self, request, context):
        sent = None
        while not self.stopping.is_set() and context.is_active():
            devices = device_list(self.config)
            health = devices[0].health if devices else None
            if health != sent:
                log.info("%d devices %s: %s %s", len(devices), FUSE_RESOURCE, health,
                         "" if health == api.HEALTHY else f"({self.config.host_device} missing on the node)")
                yield api.ListAndWatchResponse(devices=devices)
                sent = health
            self.stopping.wait(CHECK_SECONDS)

    def allocate(self, request, context):
        return allocate(self.config, request)

    def pre_start(self, request, context):
        return api.PreStartContainerResponse()


def _serialize(message) -> bytes:
    return message.SerializeToString()


def _handler(servicer: _Servicer) -> grpc.GenericRpcHandler:
    def unary(method, request_type):
        return grpc.unary_unary_rpc_method_handler(method, request_deserializer=request_type.FromString,
                                                   response_serializer=_serialize)
    return grpc.method_handlers_generic_handler(api.PLUGIN_SERVICE, {
        "GetDevicePluginOptions": unary(servicer.options, api.Empty),
        "ListAndWatch": grpc.unary_stream_rpc_method_handler(
            servicer.list_and_watch, request_deserializer=api.Empty.FromString,
            response_serializer=_serialize),
        "Allocate": unary(servicer.allocate, api.AllocateRequest),
        "PreStartContainer": unary(servicer.pre_start, api.PreStartContainerRequest),
    })


def serve(config: PluginConfig, stopping: threading.Event) -> grpc.Server:
    path = os.path.join(config.plugin_dir, SOCKET_NAME)
    if os.path.exists(path):
        os.unlink(path)  # a socket left by a plugin that was killed
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((_handler(_Servicer(config, stopping)),))
    server.add_insecure_port(f"unix://{path}")
    server.start()
    return server


def register(config: PluginConfig, timeout: float = 10.0) -> None:
    with grpc.insecure_channel(f"unix://{os.path.join(config.plugin_dir, KUBELET_SOCKET)}") as channel:
        call = channel.unary_unary(api.REGISTRATION, request_serializer=_serialize,
                                   response_deserializer=api.Empty.FromString)
        call(api.RegisterRequest(version=api.VERSION, endpoint=SOCKET_NAME, resource_name=FUSE_RESOURCE,
                                 options=api.DevicePluginOptions()), timeout=timeout)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def run(config: PluginConfig, stopping: threading.Event) -> None:
    """Serve and register; again whenever the kubelet restarted; until `stopping`."""
    own = os.path.join(config.plugin_dir, SOCKET_NAME)
    kubelet = os.path.join(config.plugin_dir, KUBELET_SOCKET)
    server, registered_with = None, None
    while not stopping.is_set():
        current = _identity(kubelet)
        if current is not None and (server is None or current != registered_with or _identity(own) is None):
            if server is not None:
                server.stop(grace=None)
            server = serve(config, stopping)
            try:
                register(config)
                registered_with = current
                log.info("registered %s with the kubelet (%s)", FUSE_RESOURCE, kubelet)
            except grpc.RpcError as exc:
                log.warning("registration with the kubelet failed, retrying: %s", exc.details() or exc)
                server.stop(grace=None)
                server = None
        stopping.wait(CHECK_SECONDS)
    if server is not None:
        server.stop(grace=1).wait()
    if os.path.exists(own):
        os.unlink(own)  # the kubelet then sees the plugin gone at once


def run_until_signalled(config: PluginConfig) -> int:
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    started = time.monotonic()
    run(config, stopping)
    log.info("stopped after %.0f s", time.monotonic() - started)
    return 0
