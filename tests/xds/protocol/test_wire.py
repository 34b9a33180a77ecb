"""Response bodies joined from the resources' bytes equal protobuf's own encoding of the same
response, whatever the bodies' lengths (varints of one, two and three bytes), with an empty
body (proto3 omits the field, never the Any around it) or another type URL among them."""

from __future__ import annotations

from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryResponse,
    DiscoveryResponse,
)
from envoy.service.discovery.v3.discovery_pb2 import Resource as Wrapper
from google.protobuf.any_pb2 import Any

from dragoman.snapshots.resources import CLUSTER, Resource
from dragoman.xds.protocol.wire import ResponseBodies

LENGTHS = (0, 1, 127, 128, 300, 16383, 16384, 70000)


def _resources(type_urls: list[str]) -> dict[str, Resource]:
    resources = {}
    for i, (length, type_url) in enumerate(zip(LENGTHS * 2, type_urls, strict=False)):
        body = bytes((i + k) % 251 for k in range(length))
        resources[f"r{i}"] = Resource.of_bytes(f"r{i}", type_url, body)
    return resources


def _by_protobuf(version: str, type_url: str, resources: dict[str, Resource]) -> bytes:
    message = DiscoveryResponse(
        version_info=version,
        resources=[Any(type_url=r.type_url, value=r.body) for r in resources.values()],
        type_url=type_url,
        nonce="7",
    )
    return message.SerializeToString(deterministic=True)


def test_sotw_bodies_equal_protobufs_encoding() -> None:
    bodies = ResponseBodies()
    same_type = _resources([CLUSTER] * (2 * len(LENGTHS)))
    mixed = _resources([CLUSTER, "type.googleapis.com/other.Type", ""] * len(LENGTHS))
    for version, resources in (("v1", same_type), ("", same_type), ("v2+ab", mixed), ("v3", {})):
        response = bodies.sotw_response(CLUSTER, version, resources, "7", whole_type=True)
        assert response.to_bytes() == _by_protobuf(version, CLUSTER, resources)


def test_delta_bodies_equal_protobufs_encoding() -> None:
    resources = _resources([CLUSTER, "type.googleapis.com/other.Type", ""] * len(LENGTHS))
    response = ResponseBodies().delta_response(CLUSTER, "v1", resources.values(), ["gone"], "7")
    message = DeltaDiscoveryResponse(
        system_version_info="v1",
        resources=[
            Wrapper(name=r.name, version=r.digest, resource=Any(type_url=r.type_url, value=r.body))
            for r in resources.values()
        ],
        type_url=CLUSTER,
        nonce="7",
        removed_resources=["gone"],
    )
    assert response.to_bytes() == message.SerializeToString(deterministic=True)
