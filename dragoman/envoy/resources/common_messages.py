"""Small builders for envoy.config.core.v3 messages and Any values shared by the translators."""

from __future__ import annotations

from envoy.config.core.v3 import address_pb2
from google.protobuf.any_pb2 import Any
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message


def pack(message: Message) -> Any:
    """Pack with deterministic bytes, so equal configuration always hashes the same."""
    return Any(
        type_url="type.googleapis.com/" + message.DESCRIPTOR.full_name,
        value=message.SerializeToString(deterministic=True),
    )


def socket_address(
    host: str,
    port: int,
    protocol: int = address_pb2.SocketAddress.TCP,
) -> address_pb2.Address:
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address=host, port_value=port, protocol=protocol)
    )


def seconds(value: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(round(value * 1_000_000_000))
    return duration
