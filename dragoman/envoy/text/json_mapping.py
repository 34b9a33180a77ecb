"""Protobuf messages → plain data in Envoy's JSON mapping (what its YAML config files use)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message


def to_json_mapping(message: Message) -> dict[str, Any]:
    """Plain dicts and lists only (MessageToDict yields OrderedDicts for Any, which YAML rejects).

    Every type packed in an Any must be registered (its _pb2 module imported) to be expanded.
    """
    text = json_format.MessageToJson(message, preserving_proto_field_name=True, indent=None)
    result: dict[str, Any] = json.loads(text)
    return result
