"""CLAs are filled in place for speed; their bytes must be those of the same message built
field by field with nested constructors, empty values included (an empty locality and a
zero weight are still present: gRPC clients require the locality)."""

from __future__ import annotations

import itertools

import pytest
from envoy.config.core.v3 import address_pb2, base_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as components_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from google.protobuf.wrappers_pb2 import UInt32Value

from dragoman.dag.model import LbEndpoint, LoadAssignment, Locality
from dragoman.envoy.resources.endpoint_messages import (
    cluster_load_assignment,
    single_host_assignment,
)


def nested_lb_endpoint(
    host: str, port: int, hostname: str, additional: tuple[str, ...] = ()
) -> components_pb2.LbEndpoint:
    def address(ip: str) -> address_pb2.Address:
        socket = address_pb2.SocketAddress(
            address=ip, port_value=port, protocol=address_pb2.SocketAddress.TCP
        )
        return address_pb2.Address(socket_address=socket)

    return components_pb2.LbEndpoint(
        endpoint=components_pb2.Endpoint(
            address=address(host),
            hostname=hostname,
            additional_addresses=[
                components_pb2.Endpoint.AdditionalAddress(address=address(ip)) for ip in additional
            ],
        )
    )


def nested_assignment(value: LoadAssignment) -> endpoint_pb2.ClusterLoadAssignment:
    return endpoint_pb2.ClusterLoadAssignment(
        cluster_name=value.cluster,
        endpoints=[
            components_pb2.LocalityLbEndpoints(
                locality=base_pb2.Locality(zone=locality.zone),
                load_balancing_weight=UInt32Value(value=locality.weight),
                lb_endpoints=[
                    nested_lb_endpoint(e.address, e.port, e.hostname, e.additional_addresses)
                    for e in locality.endpoints
                ],
            )
            for locality in value.localities
        ],
    )


ENDPOINTS = [
    LbEndpoint(host, port, hostname)
    for host, port, hostname in itertools.product(("", "10.0.0.1"), (0, 8080), ("", "a.test"))
] + [LbEndpoint("::1", 8080, "dual.test", ("127.0.0.1", "2001:db8::1"))]


@pytest.mark.parametrize("zone", ["", "zone-a"])
@pytest.mark.parametrize("weight", [0, 3])
@pytest.mark.parametrize("localities", [0, 1, 2])
def test_assignment_bytes_match_nested_construction(
    zone: str, weight: int, localities: int
) -> None:
    for count in (0, 1, len(ENDPOINTS)):
        value = LoadAssignment(
            cluster="ns/svc/80",
            localities=tuple(
                Locality(zone=zone, endpoints=tuple(ENDPOINTS[:count]), weight=weight)
                for _ in range(localities)
            ),
        )
        ours = cluster_load_assignment(value).SerializeToString(deterministic=True)
        assert ours == nested_assignment(value).SerializeToString(deterministic=True)
        if localities:
            assert (
                endpoint_pb2.ClusterLoadAssignment.FromString(ours)
                .endpoints[0]
                .HasField("locality")
            )


def test_a_host_with_several_addresses_carries_them_on_its_port() -> None:
    value = LoadAssignment(
        "ns/svc/80", (Locality("", (LbEndpoint("::1", 8080, "d.test", ("127.0.0.1",)),)),)
    )
    [endpoint] = cluster_load_assignment(value).endpoints[0].lb_endpoints
    [more] = endpoint.endpoint.additional_addresses
    assert (more.address.socket_address.address, more.address.socket_address.port_value) == (
        "127.0.0.1",
        8080,
    )


@pytest.mark.parametrize("hostname", ["", "web.example.com", "web.example.com."])
@pytest.mark.parametrize("absolute", [False, True])
def test_single_host_bytes_match_nested_construction(hostname: str, absolute: bool) -> None:
    address = hostname.rstrip(".") + "." if absolute else hostname
    expected = endpoint_pb2.ClusterLoadAssignment(
        cluster_name="ns/ext/http",
        endpoints=[
            components_pb2.LocalityLbEndpoints(
                lb_endpoints=[nested_lb_endpoint(address, 443, hostname)]
            )
        ],
    )
    ours = single_host_assignment("ns/ext/http", hostname, 443, absolute=absolute)
    assert ours.SerializeToString(deterministic=True) == expected.SerializeToString(
        deterministic=True
    )
