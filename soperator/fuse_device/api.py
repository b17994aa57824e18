"""The part of the kubelet's device plugin API (package v1beta1) a plugin that hands out one shared
device needs, as protobuf message classes built from descriptors at import: no generated code and no
protoc. Field names and numbers are the kubelet's wire format; messages and fields a plugin never
reads or fills (topology, preferred allocation, CDI names) are left out, which protobuf allows."""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "v1beta1"
VERSION = "v1beta1"
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
REGISTRATION = f"/{PACKAGE}.Registration/Register"
PLUGIN_SERVICE = f"{PACKAGE}.DevicePlugin"

_T = descriptor_pb2.FieldDescriptorProto
# message: [(field, number, type, repeated, message type)]
_MESSAGES: dict[str, list[tuple[str, int, int, bool, str | None]]] = {
    "Empty": [],
    "DevicePluginOptions": [("pre_start_required", 1, _T.TYPE_BOOL, False, None),
                            ("get_preferred_allocation_available", 2, _T.TYPE_BOOL, False, None)],
    "RegisterRequest": [("version", 1, _T.TYPE_STRING, False, None), ("endpoint", 2, _T.TYPE_STRING, False, None),
                        ("resource_name", 3, _T.TYPE_STRING, False, None),
                        ("options", 4, _T.TYPE_MESSAGE, False, "DevicePluginOptions")],
    "Device": [("ID", 1, _T.TYPE_STRING, False, None), ("health", 2, _T.TYPE_STRING, False, None)],
    "ListAndWatchResponse": [("devices", 1, _T.TYPE_MESSAGE, True, "Device")],
    "ContainerAllocateRequest": [("devices_ids", 1, _T.TYPE_STRING, True, None)],
    "AllocateRequest": [("container_requests", 1, _T.TYPE_MESSAGE, True, "ContainerAllocateRequest")],
    "DeviceSpec": [("container_path", 1, _T.TYPE_STRING, False, None), ("host_path", 2, _T.TYPE_STRING, False, None),
                   ("permissions", 3, _T.TYPE_STRING, False, None)],
    "ContainerAllocateResponse": [("devices", 3, _T.TYPE_MESSAGE, True, "DeviceSpec")],
    "AllocateResponse": [("container_responses", 1, _T.TYPE_MESSAGE, True, "ContainerAllocateResponse")],
    "PreStartContainerRequest": [("devices_ids", 1, _T.TYPE_STRING, True, None)],
    "PreStartContainerResponse": [],
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="soperator/deviceplugin_v1beta1.proto", package=PACKAGE,
                                               syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, repeated, type_name in fields:
            message.field.add(name=field, number=number, type=kind,
                              type_name=f".{PACKAGE}.{type_name}" if type_name else None,
                              label=_T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL)
    return proto


_POOL = descriptor_pool.DescriptorPool()
_FILE = _POOL.AddSerializedFile(_file().SerializeToString())
_CLASSES = {name: message_factory.GetMessageClass(_FILE.message_types_by_name[name]) for name in _MESSAGES}

Empty = _CLASSES["Empty"]
DevicePluginOptions = _CLASSES["DevicePluginOptions"]
RegisterRequest = _CLASSES["RegisterRequest"]
Device = _CLASSES["Device"]
ListAndWatchResponse = _CLASSES["ListAndWatchResponse"]
AllocateRequest = _CLASSES["AllocateRequest"]
AllocateResponse = _CLASSES["AllocateResponse"]
DeviceSpec = _CLASSES["DeviceSpec"]
PreStartContainerRequest = _CLASSES["PreStartContainerRequest"]
PreStartContainerResponse = _CLASSES["PreStartContainerResponse"]
