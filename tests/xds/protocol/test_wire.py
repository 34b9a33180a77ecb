"""Response bodies joined from the resources' bytes equal protobuf's own encoding of the same
response, whatever the bodies' lengths (varints of one, two and three bytes), with an empty
body (proto3 omits the field, never the Any around it) or another type URL among them. Streams
sending one response share its bytes, nonce included, unless a stream already sent a nonce as
large: it then gets a copy with a larger nonce of its own."""

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


def _by_protobuf(version: str, type_url: str, resources: dict[str, Resource], nonce: str) -> bytes:
    message = DiscoveryResponse(
        version_info=version,
        resources=[Any(type_url=r.type_url, value=r.body) for r in resources.values()],
        type_url=type_url,
        nonce=nonce,
    )
    return message.SerializeToString(deterministic=True)


def _delta_by_protobuf(resources: dict[str, Resource], removed: list[str], nonce: str) -> bytes:
    message = DeltaDiscoveryResponse(
        system_version_info="v1",
        resources=[
            Wrapper(name=r.name, version=r.digest, resource=Any(type_url=r.type_url, value=r.body))
            for r in resources.values()
        ],
        type_url=CLUSTER,
        nonce=nonce,
        removed_resources=removed,
    )
    return message.SerializeToString(deterministic=True)


SAME_TYPE = _resources([CLUSTER] * (2 * len(LENGTHS)))
MIXED = _resources([CLUSTER, "type.googleapis.com/other.Type", ""] * len(LENGTHS))


def test_sotw_bodies_equal_protobufs_encoding() -> None:
    bodies = ResponseBodies()
    for version, resources in (("v1", SAME_TYPE), ("", SAME_TYPE), ("v2+ab", MIXED), ("v3", {})):
        response = bodies.sotw_response(CLUSTER, version, resources, 0, whole_type=True)
        assert response.to_bytes() == _by_protobuf(version, CLUSTER, resources, response.nonce)


def test_delta_bodies_equal_protobufs_encoding() -> None:
    for removed in (["gone"], [], ["", "x" * 200]):
        response = ResponseBodies().delta_response(CLUSTER, "v1", MIXED.values(), removed, 0)
        assert response.to_bytes() == _delta_by_protobuf(MIXED, removed, response.nonce)


def test_one_response_is_one_bytes_object_for_every_stream_not_past_its_nonce() -> None:
    bodies = ResponseBodies()
    first = bodies.sotw_response(CLUSTER, "v1", SAME_TYPE, 0, whole_type=True)
    nonce = int(first.nonce)
    for after in (0, nonce - 1):
        again = bodies.sotw_response(CLUSTER, "v1", SAME_TYPE, after, whole_type=True)
        assert again.to_bytes() is first.to_bytes() and again.nonce == first.nonce
    delta = bodies.delta_response(CLUSTER, "v1", MIXED.values(), ["gone"], 0)
    shared = bodies.delta_response(CLUSTER, "v1", MIXED.values(), ["gone"], int(delta.nonce) - 1)
    assert shared.to_bytes() is delta.to_bytes()


def test_a_stream_at_or_past_a_bodys_nonce_gets_a_larger_nonce_of_its_own() -> None:
    bodies = ResponseBodies()
    first = bodies.sotw_response(CLUSTER, "v1", SAME_TYPE, 0, whole_type=True)
    delta = bodies.delta_response(CLUSTER, "v1", MIXED.values(), ["a", "b"], 0)
    drawn: list[int] = [int(first.nonce), int(delta.nonce)]
    for after in (int(first.nonce), int(delta.nonce), int(delta.nonce) + 5):
        again = bodies.sotw_response(CLUSTER, "v1", SAME_TYPE, after, whole_type=True)
        assert int(again.nonce) > after and int(again.nonce) not in drawn
        assert again.to_bytes() == _by_protobuf("v1", CLUSTER, SAME_TYPE, again.nonce)
        drawn.append(int(again.nonce))
        moved = bodies.delta_response(CLUSTER, "v1", MIXED.values(), ["a", "b"], after + 1)
        assert int(moved.nonce) > after + 1 and int(moved.nonce) not in drawn
        assert moved.to_bytes() == _delta_by_protobuf(MIXED, ["a", "b"], moved.nonce)
        drawn.append(int(moved.nonce))
    # The shared bytes are untouched by the copies.
    assert first.to_bytes() == _by_protobuf("v1", CLUSTER, SAME_TYPE, first.nonce)
