"""Messages in Envoy's JSON mapping: maps and Structs in key order, whatever order the
protobuf runtime iterates them in (it changes from one process to the next)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from envoy.config.route.v3 import route_components_pb2
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from google.protobuf.any_pb2 import Any
from google.protobuf.struct_pb2 import Struct

from dragoman.envoy.text.json_mapping import to_json_mapping

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "manifests"
KEYS = [f"key{n:03d}" for n in range(200, 0, -7)]


def test_a_struct_is_shown_in_key_order_at_every_depth() -> None:
    log = stream_pb2.StdoutAccessLog()
    fields = log.log_format.json_format
    for key in KEYS:
        fields[key] = f"%{key}%"
    nested = fields.get_or_create_struct("nested")
    for key in KEYS:
        nested[key] = 1
    shown = to_json_mapping(log)["log_format"]["json_format"]
    assert list(shown) == sorted([*KEYS, "nested"])
    assert list(shown["nested"]) == sorted(KEYS)


def test_a_map_field_and_the_messages_in_it_are_shown_in_key_order() -> None:
    route = route_components_pb2.Route(name="r")
    for key in KEYS:
        inner = Struct()
        for field in reversed(KEYS):
            inner[field] = field
        packed = Any()
        packed.Pack(inner)
        route.typed_per_filter_config[key].CopyFrom(packed)
    shown = to_json_mapping(route)["typed_per_filter_config"]
    assert list(shown) == sorted(KEYS)
    assert all(list(value["value"]) == sorted(KEYS) for value in shown.values())


def test_render_prints_the_same_text_in_every_process() -> None:
    """The example manifests carry an access log in JSON: run render in fresh processes."""
    outputs = {
        subprocess.run(
            [sys.executable, "-m", "dragoman", "render", "--manifests", str(EXAMPLES)],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
        for _ in range(3)
    }
    assert len(outputs) == 1
