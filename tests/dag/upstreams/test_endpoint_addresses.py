"""EndpointSlice addresses the API server would refuse (loopback, link-local, unspecified)
and cloud-metadata addresses never become endpoints: reported on the slice and dropped, for
every slice dragoman reads (aliases and gRPC Service targets included)."""

from __future__ import annotations

import ipaddress

import pytest

from dragoman.dag.build import build
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.endpoint_addresses import (
    DENIED_ENDPOINT_ADDRESS,
    endpoint_address_refusal,
)
from dragoman.dag.upstreams.endpoints import refresh_load_assignments
from tests.support.builders import Object, endpoint_slice
from tests.support.status_builds import store_of

DENIED = [
    ("127.0.0.25", "loopback"),
    ("127.0.0.1", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "cloud metadata"),
    ("169.254.10.1", "link-local"),
    ("fe80::1", "link-local"),
    ("0.0.0.0", "unspecified or 'this network'"),
    ("::", "unspecified"),
    ("fd00:ec2::254", "cloud metadata"),
    ("100.100.100.200", "cloud metadata"),
    ("::ffff:127.0.0.1", "loopback"),
]


@pytest.mark.parametrize(("address", "why"), DENIED)
def test_denied_endpoint_addresses(address: str, why: str) -> None:
    refusal = endpoint_address_refusal(address)
    assert refusal is not None and f"({why}: " in refusal


@pytest.mark.parametrize("address", ["10.1.2.3", "192.168.0.4", "2001:db8::5", "100.64.0.1"])
def test_pod_addresses_are_used(address: str) -> None:
    assert endpoint_address_refusal(address) is None


@pytest.mark.parametrize(
    "address", ["01.2.3.4", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4\n", " 1.2.3.4", "1.2.3.4 "]
)
def test_text_ipaddress_refuses_is_no_endpoint(address: str) -> None:
    """The IPv4 shortcut accepts exactly what the ipaddress module does."""
    assert endpoint_address_refusal(address) == f"{address!r} is not an IP address"


@pytest.mark.parametrize(
    ("address", "denied"),
    [
        ("0.255.255.255", True),
        ("1.0.0.0", False),
        ("126.255.255.255", False),
        ("127.255.255.255", True),
        ("128.0.0.0", False),
        ("169.253.255.255", False),
        ("169.254.255.255", True),
        ("169.255.0.0", False),
        ("100.100.100.199", False),
        ("100.100.100.200", True),
        ("168.63.129.16", True),
        ("192.0.0.192", True),
        ("192.0.0.193", False),
    ],
)
def test_edges_of_the_denied_ipv4_ranges(address: str, denied: bool) -> None:
    assert (endpoint_address_refusal(address) is not None) is denied


def test_an_exception_covers_only_its_range() -> None:
    lab = (ipaddress.ip_network("127.0.0.0/8"),)
    assert endpoint_address_refusal("127.0.0.25", lab) is None
    assert endpoint_address_refusal("169.254.169.254", lab) is not None
    assert endpoint_address_refusal("::1", lab) is not None


GATEWAY_AND_ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, protocol: HTTP, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: alias, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: alias, namespace: default}
spec: {type: ExternalName, externalName: target.default.svc.cluster.local, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: target, namespace: default}
spec: {ports: [{name: http, port: 80}]}
"""


def target_slice(*addresses: str, family: str = "IPv4", name: str = "target-1") -> Object:
    return endpoint_slice("target", 80, *addresses, name=name, address_type=family)


def served_addresses(dag_assignments: dict, cluster: str = "default/target/80") -> list[str]:
    assignment = dag_assignments[cluster]
    return [e.address for locality in assignment.localities for e in locality.endpoints]


def test_an_alias_to_a_selector_less_service_never_routes_to_denied_addresses() -> None:
    store = store_of(
        GATEWAY_AND_ROUTE,
        target_slice("127.0.0.25", "169.254.169.254", "0.0.0.0", "10.0.0.7"),
        target_slice("::1", "fe80::1", "fd00:ec2::254", "2001:db8::7", family="IPv6", name="t-6"),
    )

    dag = build(store)

    assert served_addresses(dict(dag.load_assignments)) == ["10.0.0.7", "2001:db8::7"]
    reported = [(p.object.name, p.field, p.reason) for p in dag.problems]
    assert reported == [
        ("t-6", "endpoints[0].addresses[0]", DENIED_ENDPOINT_ADDRESS),
        ("t-6", "endpoints[1].addresses[0]", DENIED_ENDPOINT_ADDRESS),
        ("t-6", "endpoints[2].addresses[0]", DENIED_ENDPOINT_ADDRESS),
        ("target-1", "endpoints[0].addresses[0]", DENIED_ENDPOINT_ADDRESS),
        ("target-1", "endpoints[1].addresses[0]", DENIED_ENDPOINT_ADDRESS),
        ("target-1", "endpoints[2].addresses[0]", DENIED_ENDPOINT_ADDRESS),
    ]
    assert "EndpointSlice/default/target-1" in str(dag.problems[3])
    assert "169.254.169.254 is in an always-denied range (cloud metadata" in dag.problems[4].message


def test_the_configured_exception_keeps_loopback_pods() -> None:
    store = store_of(GATEWAY_AND_ROUTE, target_slice("127.0.0.25", "169.254.169.254"))
    options = BuildOptions(endpoint_networks=(ipaddress.ip_network("127.0.0.0/8"),))

    dag = build(store, options)

    assert served_addresses(dict(dag.load_assignments)) == ["127.0.0.25"]
    assert [p.field for p in dag.problems] == ["endpoints[1].addresses[0]"]


def test_the_eds_fast_path_drops_and_reports_the_same() -> None:
    before = store_of(GATEWAY_AND_ROUTE, target_slice("10.0.0.7"))
    after = store_of(GATEWAY_AND_ROUTE, target_slice("10.0.0.7", "127.0.0.25"))
    dag = build(before)
    assert dag.problems == ()

    refreshed = refresh_load_assignments(dag, after, before)

    assert served_addresses(dict(refreshed.load_assignments)) == ["10.0.0.7"]
    assert refreshed.problems == build(after).problems
    assert [p.field for p in refreshed.problems] == ["endpoints[1].addresses[0]"]
    # And when the address goes, so does the problem.
    assert refresh_load_assignments(refreshed, before, after).problems == ()


def test_grpc_service_targets_drop_them_too() -> None:
    store = store_of(GATEWAY_AND_ROUTE, target_slice("127.0.0.25", "10.0.0.7"))

    targets = build(store, BuildOptions()).service_targets

    assert served_addresses(dict(targets.load_assignments)) == ["10.0.0.7"]
