"""The ClusterLoadAssignments proxyless gRPC clients get pass gRPC's own EDS validation
(gRFC A27 and its successors: A42, A61), which is stricter than Envoy's in places:

- every locality is present (`endpoints[i].locality`), empty when the slice has no zone;
- every locality has a load_balancing_weight above 0 (gRPC drops the others);
- no locality appears twice within a priority; priorities have no gaps;
- the sum of locality weights of a priority fits in a uint32;
- every endpoint is an IP address with a port in 1..65535, listed once (gRPC rejects
  duplicate addresses), with a health status gRPC uses (UNKNOWN or HEALTHY) and no zero
  endpoint weight.

Checked on slices without zones (most development clusters), with zones, and mixed.
"""

from __future__ import annotations

import ipaddress

import pytest
from envoy.config.core.v3 import health_check_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from dragoman.snapshots.resources import ENDPOINT
from tests.support.builders import endpoint_slice, yaml_text
from tests.support.proxyless import decoded, grpc_snapshot, serving

UINT32_MAX = (1 << 32) - 1
USED_HEALTH = (health_check_pb2.UNKNOWN, health_check_pb2.HEALTHY)

SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: grpc, port: 50051, targetPort: 9000}]
"""


def slice_text(name: str, endpoints: list[tuple[str, str]]) -> str:
    """An EndpointSlice of `web`; each endpoint is (address, zone), zone "" for none."""
    addresses = [address for address, _ in endpoints]
    zones = dict(endpoints)
    return yaml_text(endpoint_slice("web", {"grpc": 9000}, *addresses, name=name, zones=zones))


CASES = {
    "zone-less": [slice_text("web-1", [("10.0.0.1", ""), ("10.0.0.2", "")])],
    "zoned": [slice_text("web-1", [("10.0.0.1", "zone-a"), ("10.0.1.1", "zone-b")])],
    "mixed": [
        slice_text("web-1", [("10.0.0.1", ""), ("10.0.1.1", "zone-b")]),
        # The same pod listed twice (a slice being rewritten): one endpoint for gRPC.
        slice_text("web-2", [("10.0.0.1", "zone-a"), ("10.0.2.1", "zone-c")]),
    ],
}


def grpc_rule_violations(cla: endpoint_pb2.ClusterLoadAssignment) -> list[str]:
    """What gRPC's EDS parser would refuse in `cla` (empty: it accepts it)."""
    problems = []
    seen_localities: set[tuple[int, str, str, str]] = set()
    weights: dict[int, int] = {}
    addresses: set[tuple[str, int]] = set()
    for index, locality in enumerate(cla.endpoints):
        where = f"endpoints[{index}]"
        if not locality.HasField("locality"):
            problems.append(f"{where}.locality: field not present")
        weight = locality.load_balancing_weight.value
        if not locality.HasField("load_balancing_weight") or weight == 0:
            problems.append(f"{where}.load_balancing_weight: absent or 0 (locality ignored)")
        name = (locality.priority, locality.locality.region, locality.locality.zone)
        key = (*name, locality.locality.sub_zone)
        if key in seen_localities:
            problems.append(f"{where}: duplicate locality {name}")
        seen_localities.add(key)
        weights[locality.priority] = weights.get(locality.priority, 0) + weight
        for j, host in enumerate(locality.lb_endpoints):
            at = f"{where}.lb_endpoints[{j}]"
            if host.health_status not in USED_HEALTH:
                problems.append(f"{at}.health_status: not used by gRPC")
            if host.HasField("load_balancing_weight") and host.load_balancing_weight.value == 0:
                problems.append(f"{at}.load_balancing_weight: must be greater than 0")
            socket = host.endpoint.address.socket_address
            try:
                ipaddress.ip_address(socket.address)
            except ValueError:
                problems.append(f"{at}: malformed IP address {socket.address!r}")
            if socket.WhichOneof("port_specifier") != "port_value" or not (
                0 < socket.port_value <= 65535
            ):
                problems.append(f"{at}: invalid port")
            if (socket.address, socket.port_value) in addresses:
                problems.append(f"{at}: duplicate endpoint address {socket.address}")
            addresses.add((socket.address, socket.port_value))
    if weights and sorted(weights) != list(range(len(weights))):
        problems.append(f"sparse priority list {sorted(weights)}")
    problems.extend(
        f"priority {p}: sum of locality weights exceeds uint32 max"
        for p, total in weights.items()
        if total > UINT32_MAX
    )
    return problems


@pytest.mark.parametrize("case", sorted(CASES))
def test_grpc_clients_get_load_assignments_grpc_accepts(case: str) -> None:
    _, cache = serving(SERVICE, *CASES[case])
    snapshot = grpc_snapshot(cache)
    [name] = snapshot.of_type(ENDPOINT).resources
    cla = decoded(snapshot, ENDPOINT, name)
    assert isinstance(cla, endpoint_pb2.ClusterLoadAssignment)
    assert cla.endpoints, "the test needs endpoints"
    assert grpc_rule_violations(cla) == []
    zones = sorted(locality.locality.zone for locality in cla.endpoints)
    expected = {"zone-less": [""], "zoned": ["zone-a", "zone-b"], "mixed": ["", "zone-b", "zone-c"]}
    assert zones == expected[case]
    # Every pod once: 10.0.0.1 stays in its first zone.
    hosts = sorted(
        h.endpoint.address.socket_address.address for p in cla.endpoints for h in p.lb_endpoints
    )
    assert len(hosts) == len(set(hosts))


def test_the_rule_checker_catches_what_grpc_refuses() -> None:
    """The checker above is not vacuous: each rule fires on a CLA that breaks it."""
    cla = endpoint_pb2.ClusterLoadAssignment(cluster_name="x")
    first = cla.endpoints.add(priority=1)  # no locality, no weight, priority 0 missing
    host = first.lb_endpoints.add()
    host.endpoint.address.socket_address.address = "web.example.com"
    host.endpoint.address.socket_address.port_value = 70000
    host.load_balancing_weight.value = 0
    host.health_status = health_check_pb2.UNHEALTHY
    second = cla.endpoints.add(priority=1)
    second.locality.SetInParent()
    second.load_balancing_weight.value = UINT32_MAX
    again = second.lb_endpoints.add()
    again.endpoint.address.socket_address.address = "web.example.com"
    again.endpoint.address.socket_address.port_value = 70000
    third = cla.endpoints.add(priority=1)
    third.locality.SetInParent()
    third.load_balancing_weight.value = 1
    found = "\n".join(grpc_rule_violations(cla))
    for expected in (
        "locality: field not present",
        "absent or 0",
        "duplicate locality",
        "health_status",
        "must be greater than 0",
        "malformed IP address",
        "invalid port",
        "duplicate endpoint address",
        "sparse priority list",
        "exceeds uint32 max",
    ):
        assert expected in found, (expected, found)
