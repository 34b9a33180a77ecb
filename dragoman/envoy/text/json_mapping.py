"""Protobuf messages → plain data in Envoy's JSON mapping (what its YAML config files use)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format, symbol_database, unknown_fields
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

# Well-known types whose JSON is not an object of their fields.
_STRUCT = "google.protobuf.Struct"
_VALUE = "google.protobuf.Value"
_LIST_VALUE = "google.protobuf.ListValue"
_ANY = "google.protobuf.Any"
# Duration fields Envoy reads that the generated protos do not have yet (dragoman writes
# them by number): (message, field number) -> the field's name, shown as Envoy names it.
_NEWER_DURATIONS = {("envoy.extensions.clusters.dns.v3.DnsCluster", 10): "dns_min_refresh_rate"}


def to_json_mapping(message: Message) -> dict[str, Any]:
    """Plain dicts and lists only (MessageToDict yields OrderedDicts for Any, which YAML rejects),
    with the entries of every map (and Struct) in key order, as in the serialized bytes: the
    protobuf runtime iterates a map in an order that changes from one process to the next,
    and text printed for people must not.

    Every type packed in an Any must be registered (its _pb2 module imported) to be expanded.
    """
    text = json_format.MessageToJson(message, preserving_proto_field_name=True, indent=None)
    result: dict[str, Any] = json.loads(text)
    return _maps_sorted(message, result)


def _maps_sorted(message: Message, data: Any) -> Any:
    """`data`, message's JSON mapping, with its maps' entries sorted by key."""
    name = message.DESCRIPTOR.full_name
    if name in (_STRUCT, _VALUE, _LIST_VALUE):
        return _sorted_json(data)
    if name == _ANY:
        return _any_sorted(message, data)
    if not isinstance(data, dict):
        return data  # other well-known types (Duration, wrappers, ...) hold no map
    for field, value in message.ListFields():
        if field.name not in data:
            continue
        if _is_map(field):
            entries = data[field.name]
            value_field = _message_type(field).fields_by_name["value"]
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                entries = {key: _maps_sorted(value[key], entries[key]) for key in entries}
            data[field.name] = dict(sorted(entries.items()))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.is_repeated:
                data[field.name] = [
                    _maps_sorted(item, shown)
                    for item, shown in zip(value, data[field.name], strict=True)
                ]
            else:
                data[field.name] = _maps_sorted(value, data[field.name])
    return data


def _any_sorted(message: Message, data: Any) -> Any:
    type_name = message.type_url.rpartition("/")[2]  # type: ignore[attr-defined]
    if not type_name:
        return data  # an empty Any (a route enabling a filter that has no settings)
    packed_class = symbol_database.Default().GetSymbol(type_name)
    packed = packed_class.FromString(message.value)  # type: ignore[attr-defined]
    if "value" in data and packed.DESCRIPTOR.full_name in (_STRUCT, _VALUE, _LIST_VALUE):
        return {**data, "value": _sorted_json(data["value"])}
    return _with_newer_fields(packed, _maps_sorted(packed, data))


def _with_newer_fields(message: Message, data: Any) -> Any:
    """`data` with the _NEWER_DURATIONS fields `message` holds as unknown fields."""
    name = message.DESCRIPTOR.full_name
    if not isinstance(data, dict) or not any(key[0] == name for key in _NEWER_DURATIONS):
        return data
    # The stubs declare no __iter__; UnknownFieldSet iterates over its fields at run time.
    for field in unknown_fields.UnknownFieldSet(message):  # type: ignore[attr-defined]
        shown = _NEWER_DURATIONS.get((name, field.field_number))
        if shown is not None and isinstance(field.data, bytes):
            data[shown] = json_format.MessageToDict(Duration.FromString(field.data))
    return data


def _is_map(field: FieldDescriptor) -> bool:
    return (
        field.type == FieldDescriptor.TYPE_MESSAGE and _message_type(field).GetOptions().map_entry
    )


def _message_type(field: FieldDescriptor) -> Descriptor:
    message_type = field.message_type
    assert message_type is not None, field.full_name  # a TYPE_MESSAGE field has one
    return message_type


def _sorted_json(data: Any) -> Any:
    if isinstance(data, dict):
        return {key: _sorted_json(data[key]) for key in sorted(data)}
    if isinstance(data, list):
        return [_sorted_json(item) for item in data]
    return data
