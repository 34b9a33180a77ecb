"""EndpointSlices to load assignments, and the EDS fast path."""

from __future__ import annotations

import pytest

from dragoman.dag.build import build
from dragoman.dag.model import EdsCluster, LbEndpoint, LoadAssignment, Locality
from dragoman.dag.upstreams.endpoints import load_assignment, refresh_load_assignments
from dragoman.objects import (
    Endpoint,
    EndpointPort,
    EndpointSlice,
    ObjectKey,
    ObjectMeta,
)
from dragoman.objects.endpoint_slice import SERVICE_NAME_LABEL
from dragoman.store import Store
from tests.support.builders import external_service, gateway, http_route, service, typed


def eds(port_name: str = "http", target_port: int | str = 8080) -> EdsCluster:
    return EdsCluster(
        name="default/web/80",
        service=ObjectKey("Service", "default", "web"),
        port=80,
        target_port=target_port,
        port_name=port_name,
    )


def slice_of(
    *endpoints: Endpoint,
    ports: tuple[EndpointPort, ...] = (EndpointPort(8080, "http"),),
    name: str = "web-abc",
    service: str = "web",
    address_type: str = "IPv4",
) -> EndpointSlice:
    meta = ObjectMeta(name=name, labels={SERVICE_NAME_LABEL: service})
    return EndpointSlice(meta=meta, address_type=address_type, endpoints=endpoints, ports=ports)


def ep(address: str, zone: str = "", ready: bool = True) -> Endpoint:
    return Endpoint(addresses=(address,), ready=ready, zone=zone)


def one_locality(*endpoints: tuple[str, int], zone: str = "") -> LoadAssignment:
    lb = tuple(LbEndpoint(address, port) for address, port in endpoints)
    return LoadAssignment("default/web/80", (Locality(zone, lb, weight=len(lb)),))


CASES = [
    pytest.param(eds(), [], LoadAssignment("default/web/80"), id="no slices"),
    pytest.param(
        eds(),
        [slice_of(ep("10.0.0.2"), ep("10.0.0.1"), ep("10.0.0.3", ready=False))],
        one_locality(("10.0.0.1", 8080), ("10.0.0.2", 8080)),
        id="only ready endpoints, sorted",
    ),
    pytest.param(
        eds(port_name="http", target_port=9999),
        [slice_of(ep("10.0.0.1"), ports=(EndpointPort(7000, "admin"), EndpointPort(8080, "http")))],
        one_locality(("10.0.0.1", 8080)),
        id="slice port named like the service port wins",
    ),
    pytest.param(
        eds(port_name="", target_port=8080),
        [slice_of(ep("10.0.0.1"), ports=(EndpointPort(8080, ""),))],
        one_locality(("10.0.0.1", 8080)),
        id="unnamed single port",
    ),
    pytest.param(
        eds(port_name="web", target_port=8080),
        [slice_of(ep("10.0.0.1"), ports=(EndpointPort(7000, "x"), EndpointPort(8080, "y")))],
        one_locality(("10.0.0.1", 8080)),
        id="numeric targetPort picks the slice port by number",
    ),
    pytest.param(
        eds(port_name="web", target_port="metrics"),
        [slice_of(ep("10.0.0.1"), ports=(EndpointPort(7000, "x"), EndpointPort(9090, "metrics")))],
        one_locality(("10.0.0.1", 9090)),
        id="named targetPort picks the slice port by name",
    ),
    pytest.param(
        eds(port_name="web", target_port=8080),
        [slice_of(ep("10.0.0.1"), ports=(EndpointPort(8080, "web", protocol="UDP"),))],
        LoadAssignment("default/web/80"),
        id="UDP slice ports are not used",
    ),
    pytest.param(
        eds(port_name="web", target_port=8080),
        [slice_of(ep("10.0.0.1"), ports=(EndpointPort(7000, "other"),))],
        LoadAssignment("default/web/80"),
        id="no matching slice port",
    ),
    pytest.param(
        eds(),
        [
            slice_of(ep("10.0.0.1"), ep("10.0.0.2"), name="a"),
            slice_of(ep("10.0.0.2"), ep("10.0.0.3"), name="b"),
        ],
        one_locality(("10.0.0.1", 8080), ("10.0.0.2", 8080), ("10.0.0.3", 8080)),
        id="duplicates across slices",
    ),
    pytest.param(
        eds(),
        [
            slice_of(ep("10.0.0.1"), name="a"),
            slice_of(ep("db.example.com"), name="b", address_type="FQDN"),
        ],
        one_locality(("10.0.0.1", 8080)),
        id="FQDN slices skipped",
    ),
    pytest.param(
        eds(),
        [slice_of(Endpoint(addresses=()), ep("10.0.0.1"))],
        one_locality(("10.0.0.1", 8080)),
        id="endpoint without addresses skipped",
    ),
    pytest.param(
        eds(),
        [
            slice_of(
                ep("10.0.1.1", zone="b"),
                ep("10.0.0.1", zone="a"),
                ep("10.0.1.2", zone="b"),
                ep("10.0.0.9", zone="a", ready=False),
            )
        ],
        LoadAssignment(
            "default/web/80",
            (
                Locality("a", (LbEndpoint("10.0.0.1", 8080),), weight=1),
                Locality(
                    "b", (LbEndpoint("10.0.1.1", 8080), LbEndpoint("10.0.1.2", 8080)), weight=2
                ),
            ),
        ),
        id="localities by zone weighted by size",
    ),
    pytest.param(
        eds(),
        [slice_of(ep("10.0.0.1", zone="b"), name="a"), slice_of(ep("10.0.0.1", zone="a"))],
        one_locality(("10.0.0.1", 8080), zone="a"),
        id="an address in two zones counts once, in the first zone",
    ),
]


@pytest.mark.parametrize(("cluster", "slices", "expected"), CASES)
def test_load_assignment(
    cluster: EdsCluster, slices: list[EndpointSlice], expected: LoadAssignment
) -> None:
    assert load_assignment(cluster, slices) == expected
    assert load_assignment(cluster, list(reversed(slices))) == expected


def _store(*slices: EndpointSlice) -> Store:
    world = typed(
        gateway("gw", 80),
        http_route("r", "web", 80),
        service("web", 80, 8080),
        external_service("ext", "api.example.com", None),
    )
    return Store.from_objects([*world, *slices])


def test_refresh_recomputes_only_load_assignments() -> None:
    before = build(_store(slice_of(ep("10.0.0.1"))))
    after_store = _store(slice_of(ep("10.0.0.1"), ep("10.0.0.2")))
    refreshed = refresh_load_assignments(before, after_store)

    assert refreshed == build(after_store)
    assert refreshed.groups is before.groups  # reused, not rebuilt
    assert refreshed.clusters is before.clusters
    assert refreshed.load_assignments["default/web/80"] == one_locality(
        ("10.0.0.1", 8080), ("10.0.0.2", 8080)
    )


def test_refresh_ignores_slices_of_other_services() -> None:
    before = build(_store(slice_of(ep("10.0.0.1"))))
    other = slice_of(ep("10.9.9.9"), name="other-x", service="other")
    elsewhere = EndpointSlice(
        meta=ObjectMeta("web-y", "team", labels={SERVICE_NAME_LABEL: "web"}),
        endpoints=(ep("10.9.9.8"),),
        ports=(EndpointPort(8080, "http"),),
    )
    unlabelled = EndpointSlice(
        meta=ObjectMeta("web-z"), endpoints=(ep("10.9.9.7"),), ports=(EndpointPort(8080, "http"),)
    )
    store = _store(slice_of(ep("10.0.0.1")), other, elsewhere, unlabelled)
    refreshed = refresh_load_assignments(before, store)
    assert refreshed == before
