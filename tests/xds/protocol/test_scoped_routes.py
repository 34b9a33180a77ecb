"""ScopedRouteConfigurations over xDS: after listeners and before routes in ADS order, a
full-state type under SotW (Envoy subscribes by wildcard), and held like routes until the
clusters they name are warm (make before break)."""

from __future__ import annotations

from envoy.config.core.v3.base_pb2 import Node
from envoy.config.route.v3.route_components_pb2 import Route, RouteAction, RouteMatch, VirtualHost
from envoy.config.route.v3.route_pb2 import RouteConfiguration
from envoy.config.route.v3.scoped_route_pb2 import ScopedRouteConfiguration

from dragoman.snapshots.resources import (
    ADS_ORDER,
    CLUSTER,
    ENDPOINT,
    FULL_STATE_TYPES,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SHORT_NAMES,
    Resource,
    Snapshot,
    TypeSnapshot,
    ads_ordered,
)
from dragoman.xds.protocol.delta_stream import REMOVAL_ORDER, DeltaStream
from dragoman.xds.protocol.make_before_break import routes_settled
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.wire import DeltaResponse, SotwResponse
from tests.support.xds_builders import (
    ack,
    delta_ack,
    delta_request,
    eds_cluster,
    endpoints,
    listener,
    names_in,
    request,
)

NODE = Node(id="envoy-1")


def scope(host: str, *clusters: str) -> Resource:
    name = f"http-80/{host}"
    table = RouteConfiguration(
        name=name,
        virtual_hosts=[
            VirtualHost(
                name=host,
                domains=[host],
                routes=[
                    Route(match=RouteMatch(prefix=f"/{c}"), route=RouteAction(cluster=c))
                    for c in clusters
                ],
            )
        ],
    )
    key = ScopedRouteConfiguration.Key(
        fragments=[ScopedRouteConfiguration.Key.Fragment(string_key=host)]
    )
    message = ScopedRouteConfiguration(name=name, route_configuration=table, key=key)
    return Resource.of(name, message)


def served(clusters: tuple[str, ...], scopes: list[Resource]) -> Snapshot:
    return Snapshot(
        types={
            CLUSTER: TypeSnapshot.of(eds_cluster(c) for c in clusters),
            ENDPOINT: TypeSnapshot.of(endpoints(c, "10.0.0.1") for c in clusters),
            # A scoped listener names no RouteConfiguration (its scopes come whole).
            LISTENER: TypeSnapshot.of([listener("http", "unused")]),
            ROUTE: TypeSnapshot.of(()),
            SCOPED_ROUTE: TypeSnapshot.of(scopes),
        }
    )


BASE = served(("a",), [scope("a.example.com", "a")])


def only(responses: list[SotwResponse]) -> SotwResponse:
    assert len(responses) == 1, [r.type_url for r in responses]
    return responses[0]


def test_scopes_come_after_listeners_and_before_routes_and_are_full_state() -> None:
    assert ADS_ORDER.index(LISTENER) < ADS_ORDER.index(SCOPED_ROUTE) < ADS_ORDER.index(ROUTE)
    assert ads_ordered({ROUTE, SCOPED_ROUTE, CLUSTER}) == [CLUSTER, SCOPED_ROUTE, ROUTE]
    assert SCOPED_ROUTE in FULL_STATE_TYPES
    assert SHORT_NAMES[SCOPED_ROUTE] == "SRDS"
    # Removed before what they name, after the listeners that use them.
    assert REMOVAL_ORDER.index(LISTENER) < REMOVAL_ORDER.index(SCOPED_ROUTE)
    assert REMOVAL_ORDER.index(SCOPED_ROUTE) < REMOVAL_ORDER.index(CLUSTER)


def connect_sotw(stream: SotwStream) -> SotwResponse:
    cds = only(stream.on_request(request(CLUSTER, node=NODE), BASE))
    eds = only(stream.on_request(request(ENDPOINT, ["a"]), BASE))
    assert stream.on_request(ack(cds), BASE) == []
    lds = only(stream.on_request(request(LISTENER), BASE))
    assert stream.on_request(ack(eds, ["a"]), BASE) == []
    srds = only(stream.on_request(request(SCOPED_ROUTE), BASE))  # wildcard
    assert names_in(srds) == ["http-80/a.example.com"]
    assert stream.on_request(ack(lds), BASE) == []
    assert stream.on_request(ack(srds), BASE) == []
    return srds


def test_sotw_a_scope_naming_a_new_cluster_waits_until_it_is_warm() -> None:
    stream = SotwStream()
    connect_sotw(stream)
    grown = served(("a", "c"), [scope("a.example.com", "a"), scope("c.example.com", "c")])
    cds = only(stream.on_snapshot(grown))
    assert cds.type_url == CLUSTER
    eds = only(
        stream.on_request(request(ENDPOINT, ["a", "c"], nonce=stream.types[ENDPOINT].nonce), grown)
    )
    assert stream.on_request(ack(cds), grown) == []  # "c" still warming: the scope waits
    srds = only(stream.on_request(ack(eds, ["a", "c"]), grown))
    assert srds.type_url == SCOPED_ROUTE
    # Full state: every scope, the unchanged one too.
    assert names_in(srds) == ["http-80/a.example.com", "http-80/c.example.com"]


def test_sotw_a_removed_scope_is_left_out_of_the_next_response() -> None:
    stream = SotwStream()
    connect_sotw(stream)
    fewer = served(("a",), [])
    srds = only(stream.on_snapshot(fewer))
    assert srds.type_url == SCOPED_ROUTE and names_in(srds) == []


def connect_delta(stream: DeltaStream) -> None:
    (cds,) = stream.on_request(delta_request(CLUSTER, node=NODE), BASE)
    (eds,) = stream.on_request(delta_request(ENDPOINT, ["a"]), BASE)
    stream.on_request(delta_ack(cds), BASE)
    stream.on_request(delta_ack(eds), BASE)
    (lds,) = stream.on_request(delta_request(LISTENER), BASE)
    (srds,) = stream.on_request(delta_request(SCOPED_ROUTE), BASE)
    stream.on_request(delta_ack(lds), BASE)
    stream.on_request(delta_ack(srds), BASE)


def sent(response: DeltaResponse) -> list[str]:
    return sorted(r.name for r in response.message().resources)


def test_delta_sends_only_the_changed_scope_once_its_cluster_is_warm() -> None:
    stream = DeltaStream()
    connect_delta(stream)
    grown = served(("a", "c"), [scope("a.example.com", "a"), scope("c.example.com", "c")])
    responses = stream.on_snapshot(grown)
    assert [r.type_url for r in responses] == [CLUSTER]  # the scope waits for "c"
    (cds,) = responses
    (eds,) = stream.on_request(delta_request(ENDPOINT, ["c"]), grown)
    assert stream.on_request(delta_ack(cds), grown) == []
    (srds,) = stream.on_request(delta_ack(eds), grown)
    assert srds.type_url == SCOPED_ROUTE
    assert sent(srds) == ["http-80/c.example.com"]  # the unchanged scope is not sent again


def test_delta_removes_a_scope_by_name() -> None:
    stream = DeltaStream()
    connect_delta(stream)
    (srds,) = stream.on_snapshot(served(("a",), []))
    assert srds.type_url == SCOPED_ROUTE
    assert list(srds.message().removed_resources) == ["http-80/a.example.com"]


def test_routes_settle_once_the_scopes_are_acked() -> None:
    stream = SotwStream()
    (lds,) = stream.on_request(request(LISTENER, node=NODE), BASE)
    (srds,) = stream.on_request(request(SCOPED_ROUTE), BASE)
    stream.on_request(ack(lds), BASE)
    assert not routes_settled(stream.types, BASE)  # the scopes are in flight
    stream.on_request(ack(srds), BASE)
    assert routes_settled(stream.types, BASE)
    changed = served(("a",), [scope("a.example.com", "a", "a")])
    stream.on_snapshot(changed)
    assert not routes_settled(stream.types, changed)
