"""What the SotW and the delta stream state machines must both do, driven without a network:
each test runs once per protocol (`sotw`, `delta`), with the requests that protocol's client
sends. What one protocol alone does is tested in test_sotw_stream.py and
test_delta_stream.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import pytest
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.xds.protocol.delta_state import MAX_PENDING
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.events import Ack, MissingTypeUrl, StaleRequest, WrongTypeUrl
from dragoman.xds.protocol.make_before_break import ClusterWarmth
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.stream_protocol import StreamMemos
from dragoman.xds.protocol.wire import DeltaResponse, Response, SotwResponse
from tests.support.xds_builders import (
    ack,
    delta_ack,
    delta_request,
    dns_cluster,
    eds_cluster,
    endpoints,
    listener,
    names_in,
    request,
    routes,
    snapshot,
)

NODE = Node(id="envoy-1", cluster="default/gateway")
GRPC_NODE = Node(id="grpc-1", user_agent_name="gRPC Go")

Stream = SotwStream | DeltaStream
Request = DiscoveryRequest | DeltaDiscoveryRequest


@dataclass(frozen=True)
class Flavour:
    """One protocol, as its client speaks it."""

    name: str
    new_stream: Callable[[str | None, StreamMemos | None], Stream]
    # A request subscribing to `names` (none: a legacy wildcard, where the type allows it).
    first: Callable[[str, Iterable[str], Node | None], Request]
    # The ACK of a response, the subscription (`names`, SotW) unchanged.
    ack: Callable[[Response, Iterable[str]], Request]
    # The ACK of a response that changes the subscription: to `now` (SotW), by adding and
    # removing names (delta).
    change: Callable[[Response, Iterable[str], Iterable[str], Iterable[str]], Request]
    version: Callable[[Response], str]  # version_info, or system_version_info
    held: Callable[[Stream, str], Mapping[str, object]]  # what the client holds, by name
    removed: Callable[[Response], tuple[str, ...]]  # names a response says are gone
    # Removed clusters held back until the routes that may name them are replaced.
    holding_back: Callable[[Stream], bool]


def _sotw(response: Response) -> SotwResponse:
    assert isinstance(response, SotwResponse)
    return response


def _delta(response: Response) -> DeltaResponse:
    assert isinstance(response, DeltaResponse)
    return response


def _sotw_stream(stream: Stream) -> SotwStream:
    assert isinstance(stream, SotwStream)
    return stream


def _delta_stream(stream: Stream) -> DeltaStream:
    assert isinstance(stream, DeltaStream)
    return stream


SOTW = Flavour(
    name="sotw",
    new_stream=lambda type_url, memos: SotwStream(type_url, memos),
    first=lambda type_url, names, node: request(type_url, names, node=node),
    ack=lambda response, names: ack(_sotw(response), names),
    change=lambda response, now, added, removed: ack(_sotw(response), now),
    version=lambda response: _sotw(response).version_info,
    held=lambda stream, type_url: _sotw_stream(stream).types[type_url].sent,
    removed=lambda response: (),  # full-state types say it by leaving names out
    holding_back=lambda stream: bool(_sotw_stream(stream).types[CLUSTER].retained),
)
DELTA = Flavour(
    name="delta",
    new_stream=lambda type_url, memos: DeltaStream(type_url, memos),
    first=lambda type_url, names, node: delta_request(type_url, names, node=node),
    ack=lambda response, names: delta_ack(_delta(response)),
    change=lambda response, now, added, removed: delta_request(
        response.type_url, added, removed, nonce=response.nonce
    ),
    version=lambda response: _delta(response).system_version_info,
    held=lambda stream, type_url: _delta_stream(stream).types[type_url].held,
    removed=lambda response: _delta(response).removed,
    holding_back=lambda stream: _delta_stream(stream).types[CLUSTER].deferred_removals,
)


@pytest.fixture(params=[SOTW, DELTA], ids=lambda flavour: flavour.name)
def flavour(request: pytest.FixtureRequest) -> Flavour:
    found: Flavour = request.param
    return found


def new_stream(
    flavour: Flavour, type_url: str | None = None, memos: StreamMemos | None = None
) -> Stream:
    return flavour.new_stream(type_url, memos)


def first(
    flavour: Flavour, type_url: str, names: Iterable[str] = (), node: Node | None = None
) -> Request:
    return flavour.first(type_url, names, node)


def feed(stream: Stream, message: Request, snap: Snapshot) -> list[Response]:
    if isinstance(stream, DeltaStream):
        assert isinstance(message, DeltaDiscoveryRequest)
        return list(stream.on_request(message, snap))
    assert isinstance(message, DiscoveryRequest)
    return list(stream.on_request(message, snap))


def push(stream: Stream, snap: Snapshot) -> list[Response]:
    return list(stream.on_snapshot(snap))


def only(responses: list[Response]) -> Response:
    assert len(responses) == 1, [(r.type_url, r.names) for r in responses]
    return responses[0]


def base_snapshot() -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )


def connect_envoy(flavour: Flavour, stream: Stream, snap: Snapshot) -> dict[str, Response]:
    """Envoy's ADS start-up: wildcard CDS, EDS by name, wildcard LDS, RDS by name, all ACKed."""
    last: dict[str, Response] = {}
    cds = last[CLUSTER] = only(feed(stream, first(flavour, CLUSTER, node=NODE), snap))
    cluster_names = names_in(cds)
    eds = last[ENDPOINT] = only(feed(stream, first(flavour, ENDPOINT, cluster_names), snap))
    assert feed(stream, flavour.ack(cds, ()), snap) == []
    lds = last[LISTENER] = only(feed(stream, first(flavour, LISTENER), snap))
    assert feed(stream, flavour.ack(eds, cluster_names), snap) == []
    rds = last[ROUTE] = only(feed(stream, first(flavour, ROUTE, ["routes-http"]), snap))
    assert feed(stream, flavour.ack(lds, ()), snap) == []
    assert feed(stream, flavour.ack(rds, ["routes-http"]), snap) == []
    stream.take_events()
    return last


# Stream identity and type_url.


def test_node_taken_from_first_request_later_requests_may_omit_it(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    snap = base_snapshot()
    cds = only(feed(stream, first(flavour, CLUSTER, node=NODE), snap))
    feed(stream, flavour.ack(cds, ()), snap)
    assert stream.node is not None and stream.node.id == "envoy-1"
    feed(stream, first(flavour, LISTENER, node=Node(id="other")), snap)
    assert stream.node.id == "envoy-1"


def test_ads_request_without_type_url_is_an_error(flavour: Flavour) -> None:
    with pytest.raises(MissingTypeUrl):
        feed(new_stream(flavour), first(flavour, "", node=NODE), base_snapshot())


def test_single_type_stream_rejects_another_type_url(flavour: Flavour) -> None:
    with pytest.raises(WrongTypeUrl):
        feed(new_stream(flavour, CLUSTER), first(flavour, LISTENER, node=NODE), base_snapshot())


def test_unknown_type_on_ads_is_remembered_and_gets_nothing(flavour: Flavour) -> None:
    secret = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
    stream = new_stream(flavour)
    assert feed(stream, first(flavour, secret, ["cert"], NODE), base_snapshot()) == []
    assert stream.types[secret].names == {"cert"}


# Subscriptions.


def test_legacy_wildcard_first_empty_request_lds_cds(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    snap = base_snapshot()
    cds = only(feed(stream, first(flavour, CLUSTER, node=NODE), snap))
    assert names_in(cds) == ["a", "b"]
    assert stream.types[CLUSTER].wildcard
    lds = only(feed(stream, first(flavour, LISTENER), snap))
    assert names_in(lds) == ["http"]
    # Envoy ACKs with an empty list again: still wildcard.
    feed(stream, flavour.ack(cds, ()), snap)
    feed(stream, flavour.ack(lds, ()), snap)
    grown = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")],
        listeners=[listener("http", "routes-http")],
    )
    # SotW sends the whole set again, delta only what the client lacks.
    pushed = {"sotw": ["a", "b", "c"], "delta": ["c"]}[flavour.name]
    assert names_in(only(push(stream, grown))) == pushed


def test_explicit_wildcard_star_and_its_end(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    snap = base_snapshot()
    cds = only(feed(stream, first(flavour, CLUSTER, ["*"], NODE), snap))
    assert names_in(cds) == ["a", "b"]
    # SotW: after an explicit subscription an empty list means nothing, not wildcard;
    # delta: the wildcard is unsubscribed. Nothing more is sent for what it covered.
    assert feed(stream, flavour.change(cds, [], [], ["*"]), snap) == []
    assert not stream.types[CLUSTER].wildcard and flavour.held(stream, CLUSTER) == {}
    grown = snapshot(clusters=[eds_cluster("a", timeout_s=3), eds_cluster("c")])
    assert push(stream, grown) == []


@pytest.mark.parametrize("type_url", [CLUSTER, LISTENER], ids=["cds", "lds"])
def test_no_legacy_wildcard_for_grpc_clients(flavour: Flavour, type_url: str) -> None:
    # gRPC names every resource it wants: an empty list never means "everything".
    stream = new_stream(flavour)
    response = only(feed(stream, first(flavour, type_url, node=GRPC_NODE), base_snapshot()))
    assert names_in(response) == [] and flavour.removed(response) == ()
    assert not stream.types[type_url].wildcard
    named = flavour.change(response, ["a", "http"], ["a", "http"], [])
    later = only(feed(stream, named, base_snapshot()))
    assert names_in(later) == (["a"] if type_url == CLUSTER else ["http"])


def test_eds_rds_empty_first_request_is_not_wildcard(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    snap = base_snapshot()
    answers = feed(stream, first(flavour, ENDPOINT, node=NODE), snap)
    answers += feed(stream, first(flavour, ROUTE), snap)
    # Delta answers each first request, if only with nothing; SotW answers nothing at all.
    assert len(answers) == {"sotw": 0, "delta": 2}[flavour.name]
    assert all(names_in(r) == [] and flavour.removed(r) == () for r in answers)
    assert not stream.types[ENDPOINT].wildcard
    assert not stream.types[ROUTE].wildcard


def test_new_subscription_sends_only_the_new_resource(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    snap = base_snapshot()
    eds = only(feed(stream, first(flavour, ENDPOINT, ["a"], NODE), snap))
    response = only(feed(stream, flavour.change(eds, ["a", "b"], ["b"], []), snap))
    assert names_in(response) == ["b"]


def test_unsubscribe_then_resubscribe_resends_unchanged_resource(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    snap = base_snapshot()
    eds = only(feed(stream, first(flavour, ENDPOINT, ["a", "b"], NODE), snap))
    assert feed(stream, flavour.change(eds, ["a"], [], ["b"]), snap) == []
    assert "b" not in flavour.held(stream, ENDPOINT)
    response = only(feed(stream, flavour.change(eds, ["a", "b"], ["b"], []), snap))
    assert names_in(response) == ["b"]


# Response content and encoding.


def test_a_name_never_appears_twice_in_a_response(flavour: Flavour) -> None:
    snap = base_snapshot()
    eds = only(
        feed(new_stream(flavour), first(flavour, ENDPOINT, ["a", "a", "b", "a"], NODE), snap)
    )
    assert names_in(eds) == ["a", "b"]
    cds = only(feed(new_stream(flavour), first(flavour, CLUSTER, ["*", "a", "a"], NODE), snap))
    assert names_in(cds) == ["a", "b"]


def test_response_bytes_equal_protobuf_deterministic_encoding(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    responses = list(connect_envoy(flavour, stream, base_snapshot()).values())
    # A name that does not exist: delta says so in removed_resources.
    responses.append(
        only(
            feed(
                new_stream(flavour), first(flavour, CLUSTER, ["a", "ghost"], NODE), base_snapshot()
            )
        )
    )
    assert flavour.removed(responses[-1]) == {"sotw": (), "delta": ("ghost",)}[flavour.name]
    for response in responses:
        message = response.message()
        assert response.to_bytes() == message.SerializeToString(deterministic=True)
        assert message.nonce == response.nonce and message.type_url == response.type_url
        version = message.version_info if flavour is SOTW else message.system_version_info
        assert version == flavour.version(response)


def test_streams_sending_one_response_share_its_bytes_nonce_included(flavour: Flavour) -> None:
    snap = base_snapshot()
    memos = StreamMemos()  # one cache's, which its server's streams share
    one, other = new_stream(flavour, None, memos), new_stream(flavour, None, memos)
    feed(one, first(flavour, ROUTE, ["routes-http"], NODE), snap)  # moves its nonce on
    a = only(feed(one, first(flavour, CLUSTER), snap))
    b = only(feed(other, first(flavour, CLUSTER, node=NODE), snap))
    assert a.to_bytes() is b.to_bytes()  # one encoding, written by both as it is
    assert a.nonce == b.nonce


def test_a_stream_past_a_shared_nonce_sends_a_copy_with_a_larger_one(flavour: Flavour) -> None:
    snap = base_snapshot()
    memos = StreamMemos()
    one, other = new_stream(flavour, None, memos), new_stream(flavour, None, memos)
    a = only(feed(one, first(flavour, CLUSTER, node=NODE), snap))
    # The route body is encoded after the cluster body: its nonce is larger.
    routes = only(feed(other, first(flavour, ROUTE, ["routes-http"], NODE), snap))
    assert int(routes.nonce) > int(a.nonce)
    b = only(feed(other, first(flavour, CLUSTER), snap))
    assert int(b.nonce) > int(routes.nonce)  # each nonce of a stream larger than its last
    message = b.message()
    assert message.nonce == b.nonce
    message.nonce = a.nonce
    assert message.SerializeToString(deterministic=True) == a.to_bytes()  # only the nonce


def test_content_rolled_back_goes_out_again_under_a_new_nonce(flavour: Flavour) -> None:
    """A change and its rollback: the body of the content served first is still encoded,
    under a nonce this stream sent already. It goes out again as a copy with a larger nonce,
    and an answer naming the old nonce is stale, not an ACK of the copy."""
    stream = new_stream(flavour)
    base = base_snapshot()
    first_lds = connect_envoy(flavour, stream, base)[LISTENER]
    moved = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http", port=8081)],
        route_configs=[routes("routes-http", "a", "b")],
    )
    changed = only(push(stream, moved))
    assert feed(stream, flavour.ack(changed, ()), moved) == []
    back = only(push(stream, base))
    assert back.type_url == LISTENER and int(back.nonce) > int(changed.nonce)
    message = back.message()
    message.nonce = first_lds.nonce
    assert message.SerializeToString(deterministic=True) == first_lds.to_bytes()
    stream.take_events()
    assert feed(stream, flavour.ack(first_lds, ()), base) == []
    assert [type(e) for e in stream.take_events()] == [StaleRequest]
    assert feed(stream, flavour.ack(back, ()), base) == []
    acks = [e for e in stream.take_events() if isinstance(e, Ack)]
    assert [(a.type_url, a.nonce) for a in acks] == [(LISTENER, back.nonce)]


def test_unchanged_snapshot_pushes_nothing(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    connect_envoy(flavour, stream, base_snapshot())
    assert push(stream, base_snapshot()) == []
    assert all(not state.in_flight for state in stream.types.values())


# ADS order and make-before-break.


def test_ads_push_order_is_cds_eds_lds_rds(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    connect_envoy(flavour, stream, base_snapshot())
    everything_changed = snapshot(
        clusters=[eds_cluster("a", timeout_s=3), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.5")],
        listeners=[listener("http", "routes-http", port=8081)],
        route_configs=[routes("routes-http", "b", "a")],
    )
    cds, eds = push(stream, everything_changed)
    assert [cds.type_url, eds.type_url] == [CLUSTER, ENDPOINT]
    # One EDS response: "b" changed, "a" re-sent because its cluster changed.
    assert names_in(eds) == ["a", "b"]
    # Listeners and routes once cluster "a" is warm: its CDS and CLA ACKed.
    assert feed(stream, flavour.ack(cds, ()), everything_changed) == []
    named = feed(stream, flavour.ack(eds, ["a", "b"]), everything_changed)
    assert [r.type_url for r in named] == [LISTENER, ROUTE]


def test_cla_resent_after_cds_change_of_an_eds_cluster(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    snap = base_snapshot()
    connected = connect_envoy(flavour, stream, snap)
    cluster_changed = snapshot(
        clusters=[eds_cluster("a", timeout_s=5), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    cds, eds = push(stream, cluster_changed)
    assert (cds.type_url, eds.type_url) == (CLUSTER, ENDPOINT)
    assert names_in(eds) == ["a"]  # unchanged, but Envoy needs it to finish warming "a"
    assert eds.nonce not in (connected[ENDPOINT].nonce, cds.nonce)
    assert flavour.version(eds) == snap.of_type(ENDPOINT).version


def test_removed_clusters_go_at_once_when_routes_do_not_change(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    connect_envoy(flavour, stream, base_snapshot())
    fewer = snapshot(
        clusters=[eds_cluster("a")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    response = only(push(stream, fewer))
    assert response.type_url == CLUSTER
    # SotW: the whole set without "b"; delta: the removal of "b" alone.
    expected = {"sotw": (["a"], ()), "delta": ([], ("b",))}[flavour.name]
    assert (names_in(response), flavour.removed(response)) == expected
    assert not flavour.holding_back(stream)


def test_ads_routes_wait_for_a_new_cluster_and_its_endpoints(flavour: Flavour) -> None:
    stream = new_stream(flavour)
    connected = connect_envoy(flavour, stream, base_snapshot())
    # The routes move from "b" to the new "c": Envoy would answer 503 NC for "c" until its
    # cluster and CLA arrive, so the routes wait for both ACKs.
    moved = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("c", "10.0.0.3")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "c")],
    )
    cds = only(push(stream, moved))
    assert cds.type_url == CLUSTER and "c" in names_in(cds)
    # Envoy asks for the new cluster's CLA before it answers the clusters (ADS: in order).
    subscribe_c = flavour.change(connected[ENDPOINT], ["a", "b", "c"], ["c"], [])
    eds = only(feed(stream, subscribe_c, moved))
    assert names_in(eds) == ["c"]
    assert feed(stream, flavour.ack(cds, ()), moved) == []  # "c" still warming
    rds = only(feed(stream, flavour.ack(eds, ["a", "b", "c"]), moved))
    assert rds.type_url == ROUTE and names_in(rds) == ["routes-http"]
    assert flavour.holding_back(stream)  # "b" until the routes no longer name it


def moved_to_c(a_address: str) -> Snapshot:
    """The routes moved from "b" to a new EDS cluster "c"; a's endpoint at `a_address`."""
    return snapshot(
        clusters=[eds_cluster("a"), eds_cluster("c")],
        assignments=[endpoints("a", a_address), endpoints("c", "10.0.0.3")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "c")],
    )


def test_routes_waiting_for_a_cla_go_when_a_later_eds_response_is_acked(
    flavour: Flavour,
) -> None:
    """Endpoints churn while a new cluster's CLA is in flight: its answer comes after the next
    EDS response went (stale, in SotW), and the ACK of that one answers both (a client
    applies responses in order). The routes must not wait for good."""
    stream = new_stream(flavour)
    connected = connect_envoy(flavour, stream, base_snapshot())

    moved = moved_to_c("10.0.0.1")
    cds = only(push(stream, moved))
    subscribe_c = flavour.change(connected[ENDPOINT], ["a", "b", "c"], ["c"], [])
    eds_c = only(feed(stream, subscribe_c, moved))
    assert feed(stream, flavour.ack(cds, ()), moved) == []  # "c" still warming
    churned = moved_to_c("10.0.0.9")  # a's endpoints move before c's CLA is answered
    eds_a = only(push(stream, churned))
    assert eds_a.type_url == ENDPOINT and names_in(eds_a) == ["a"]
    sent = feed(stream, flavour.ack(eds_c, ["a", "b", "c"]), churned)
    sent += feed(stream, flavour.ack(eds_a, ["a", "b", "c"]), churned)
    assert [(r.type_url, names_in(r)) for r in sent] == [(ROUTE, ["routes-http"])]


def test_routes_waiting_for_a_cla_whose_response_was_forgotten_go_at_the_next_ack() -> None:
    """Delta keeps MAX_PENDING responses in flight per type: one forgotten (its answer will
    be stale) no longer holds the routes once a later one is answered."""
    stream = new_stream(DELTA)
    connected = connect_envoy(DELTA, stream, base_snapshot())

    moved = moved_to_c("10.0.0.1")
    cds = only(push(stream, moved))
    only(feed(stream, DELTA.change(connected[ENDPOINT], ["a", "b", "c"], ["c"], []), moved))
    assert feed(stream, DELTA.ack(cds, ()), moved) == []  # "c" still warming
    sent: list[Response] = []
    for i in range(MAX_PENDING):  # a's endpoints churn, nothing answered
        sent += push(stream, moved_to_c(f"10.0.1.{i}"))
    last = [r for r in sent if r.type_url == ENDPOINT][-1]
    sent += feed(stream, DELTA.ack(last, ["a", "b", "c"]), moved_to_c(f"10.0.1.{MAX_PENDING - 1}"))
    assert [names_in(r) for r in sent if r.type_url == ROUTE] == [["routes-http"]]


def test_a_cluster_the_client_does_not_ask_endpoints_for_does_not_hold_routes(
    flavour: Flavour,
) -> None:
    # Over ADS Envoy asks for a new cluster's CLA before it ACKs the cluster: a client that
    # has not (a proxyless gRPC client fetches what its routes name) is not waited for.
    stream = new_stream(flavour)
    connect_envoy(flavour, stream, base_snapshot())
    grown = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2"), endpoints("c")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b", "c")],
    )
    cds = only(push(stream, grown))
    rds = only(feed(stream, flavour.ack(cds, ()), grown))
    assert rds.type_url == ROUTE


def test_per_type_streams_of_one_node_make_before_break_together(flavour: Flavour) -> None:
    """CDS, EDS, LDS and RDS on streams of their own, sharing the node's ClusterWarmth (as
    the server gives them), in the order a server's streams may well run."""
    snap = base_snapshot()
    warmth = ClusterWarmth()
    wakes: list[int] = []
    warmth.wake = lambda: wakes.append(1)
    streams = {t: new_stream(flavour, t) for t in (CLUSTER, ENDPOINT, LISTENER, ROUTE)}
    for per_type in streams.values():
        per_type.warmth = warmth
    names = {CLUSTER: (), ENDPOINT: ("a", "b"), LISTENER: (), ROUTE: ("routes-http",)}
    last: dict[str, Response] = {}
    for type_url, per_type in streams.items():
        last[type_url] = only(feed(per_type, first(flavour, type_url, names[type_url], NODE), snap))
        assert feed(per_type, flavour.ack(last[type_url], names[type_url]), snap) == []
    moved = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("c", "10.0.0.3")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "c")],
    )
    # The RDS stream sees the change first: its CDS stream has not even sent "c". A request
    # meanwhile (an ACK come late, here again) does not send what the push held.
    assert push(streams[ROUTE], moved) == []
    assert feed(streams[ROUTE], flavour.ack(last[ROUTE], names[ROUTE]), moved) == []
    cds = only(push(streams[CLUSTER], moved))
    # SotW keeps "b" in the set, delta holds its removal back: the routes still name it.
    assert names_in(cds) == {"sotw": ["a", "b", "c"], "delta": ["c"]}[flavour.name]
    assert flavour.removed(cds) == ()
    assert push(streams[ENDPOINT], moved) == []  # delta holds back the removal of b's CLA
    eds_now = ["a", "b", "c"]
    eds = only(feed(streams[ENDPOINT], flavour.change(last[ENDPOINT], eds_now, ["c"], []), moved))
    assert names_in(eds) == ["c"]
    assert feed(streams[CLUSTER], flavour.ack(cds, ()), moved) == []
    assert wakes == []  # c's CLA not ACKed yet
    assert feed(streams[ENDPOINT], flavour.ack(eds, eds_now), moved) == []
    assert wakes == [1]  # the server wakes the node's streams: the RDS one sends
    rds = only(push(streams[ROUTE], moved))
    assert names_in(rds) == ["routes-http"]
    assert push(streams[CLUSTER], moved) == []  # "b" still named until the routes are ACKed
    assert feed(streams[ROUTE], flavour.ack(rds, ["routes-http"]), moved) == []
    assert wakes == [1, 1]  # the routes replaced: the removals may go
    final = only(push(streams[CLUSTER], moved))
    assert (names_in(final), flavour.removed(final)) == {
        "sotw": (["a", "c"], ()),
        "delta": ([], ("b",)),
    }[flavour.name]
    removed_cla = push(streams[ENDPOINT], moved)
    if flavour is DELTA:
        assert [flavour.removed(r) for r in removed_cla] == [("b",)]


def test_routes_to_a_new_dns_cluster_wait_for_the_grace_of_its_first_answer(
    flavour: Flavour,
) -> None:
    # A strict-DNS cluster warms until its first DNS answer, which xDS does not report:
    # once Envoy ACKed it, the shell's grace runs, then the routes go.
    stream = new_stream(flavour)
    graces: list[int] = []
    stream.warmth.grace = lambda: graces.append(1)
    base = snapshot(
        clusters=[eds_cluster("a")],
        assignments=[endpoints("a", "10.0.0.1")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a")],
    )
    cds = only(feed(stream, first(flavour, CLUSTER, node=NODE), base))
    eds = only(feed(stream, first(flavour, ENDPOINT, ["a"]), base))
    feed(stream, flavour.ack(cds, ()), base)
    feed(stream, flavour.ack(eds, ["a"]), base)
    lds = only(feed(stream, first(flavour, LISTENER), base))
    rds = only(feed(stream, first(flavour, ROUTE, ["routes-http"]), base))
    feed(stream, flavour.ack(lds, ()), base)
    feed(stream, flavour.ack(rds, ["routes-http"]), base)
    graces.clear()  # the first clusters' grace, at start-up
    external = snapshot(
        clusters=[eds_cluster("a"), dns_cluster("ext", "api.example.com")],
        assignments=[endpoints("a", "10.0.0.1")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "ext")],
    )
    cds = only(push(stream, external))
    assert feed(stream, flavour.ack(cds, ()), external) == []
    assert graces == [1]
    stream.warmth.resolved()  # the grace is over (the shell calls it, then wakes the stream)
    assert [r.type_url for r in push(stream, external)] == [ROUTE]
    # A cluster the client has already, changed: the old one serves while it warms.
    changed = snapshot(
        clusters=[eds_cluster("a"), dns_cluster("ext", "api2.example.com")],
        assignments=[endpoints("a", "10.0.0.1")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "ext")],
    )
    cds = only(push(stream, changed))
    assert [r.type_url for r in feed(stream, flavour.ack(cds, ()), changed)] == [ROUTE]
    assert graces == [1]
