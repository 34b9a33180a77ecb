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
from dragoman.snapshots.sorted_listing import SortedListing
from dragoman.xds.protocol.delta_stream import REMOVAL_ORDER, DeltaStream
from dragoman.xds.protocol.digest_maps import DigestMaps
from dragoman.xds.protocol.make_before_break import routes_settled
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.stream_protocol import StreamMemos
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


def listed(base: Snapshot, listing: SortedListing) -> Snapshot:
    return Snapshot(types={**base.types, SCOPED_ROUTE: listing.snapshot})


def test_delta_a_scope_snapshot_derived_from_the_one_held_sends_only_what_differs() -> None:
    """Two idle streams share the diff and digest map of the scopes' snapshot made from the
    one they hold: the changed scope sent, the gone one removed, nothing else."""
    hosts = [f"{i}.example.com" for i in range(20)]
    listing = SortedListing.of(scope(h, "a") for h in hosts)
    held = listed(BASE, listing)
    memos = StreamMemos()
    streams = [DeltaStream(memos=memos) for _ in range(2)]
    for stream in streams:
        (cds,) = stream.on_request(delta_request(CLUSTER, node=NODE), held)
        (eds,) = stream.on_request(delta_request(ENDPOINT, ["a"]), held)
        stream.on_request(delta_ack(cds), held)
        stream.on_request(delta_ack(eds), held)
        (lds,) = stream.on_request(delta_request(LISTENER), held)
        (srds,) = stream.on_request(delta_request(SCOPED_ROUTE), held)
        stream.on_request(delta_ack(lds), held)
        stream.on_request(delta_ack(srds), held)
    changed = listing.changed(
        {
            "http-80/3.example.com": scope("3.example.com", "a", "a"),
            "http-80/7.example.com": None,
            "http-80/4.example.com": listing.snapshot.resources["http-80/4.example.com"],
        }
    )
    now = listed(held, changed)
    maps = memos.digest_maps
    for stream in streams:
        updated, removed = stream.on_snapshot(now)  # additions first, then removals
        assert sent(updated) == ["http-80/3.example.com"]
        assert list(updated.message().removed_resources) == []
        assert sent(removed) == []
        assert list(removed.message().removed_resources) == ["http-80/7.example.com"]
        stream.on_request(delta_ack(updated), now)
        stream.on_request(delta_ack(removed), now)
        state = stream.types[SCOPED_ROUTE]
        assert state.held.mapping is maps.digests_of(changed.snapshot)  # shared, not copied
        assert dict(state.held.mapping) == {
            n: r.digest for n, r in changed.snapshot.resources.items()
        }


def test_a_derived_scope_snapshot_diffs_as_a_whole_comparison_does() -> None:
    listing = SortedListing.of(scope(f"{i}.example.com", "a") for i in range(10))
    changed = listing.changed(
        {
            "http-80/2.example.com": scope("2.example.com", "a", "a"),
            "http-80/5.example.com": None,
            "http-80/55.example.com": scope("55.example.com", "a"),
            # Made again with the same bytes: not a difference a client is sent.
            "http-80/8.example.com": scope("8.example.com", "a"),
        }
    )
    whole = TypeSnapshot.of(changed.snapshot.resources.values())  # derived from nothing
    assert whole.version == changed.snapshot.version and whole.derived is None
    quick, slow = DigestMaps(), DigestMaps()
    for maps in (quick, slow):
        maps.digests_of(listing.snapshot)
    expected = slow.shared_diff(listing.snapshot.version, whole)
    assert expected == (
        ("http-80/2.example.com", "http-80/55.example.com"),
        ("http-80/5.example.com",),
    )
    assert quick.shared_diff(listing.snapshot.version, changed.snapshot) == expected
    assert quick.digests_of(changed.snapshot) == slow.digests_of(whole)
