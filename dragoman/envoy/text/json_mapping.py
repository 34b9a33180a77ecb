"""Protobuf messages → plain data in Envoy's JSON mapping (what its YAML config files use)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format, symbol_database
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

# Well-known types whose JSON is not an object of their fields.
_STRUCT = "google.protobuf.Struct"
_VALUE = "google.protobuf.Value"
_LIST_VALUE = "google.protobuf.ListValue"
_ANY = "google.protobuf.Any"


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
    return _maps_sorted(packed, data)


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
