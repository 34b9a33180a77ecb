"""The delta (incremental) stream state machine, driven without a network.

Each test is named after the protocol rule it checks (xds_protocol.rst, "Incremental xDS",
and the xDS protocol reference).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from envoy.config.core.v3.base_pb2 import Node

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.xds.protocol import delta_stream
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.events import Ack, Nack, StaleRequest
from dragoman.xds.protocol.resource_status import ClientStatus, ConfigStatus
from dragoman.xds.protocol.stream_protocol import StreamMemos
from dragoman.xds.protocol.wire import DeltaResponse
from tests.support.xds_builders import (
    delta_ack,
    delta_nack,
    delta_request,
    dns_cluster,
    eds_cluster,
    endpoints,
    listener,
    names_in,
    routes,
    snapshot,
    versions_in,
)

NODE = Node(id="envoy-delta", cluster="default/gateway")


def base_snapshot() -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )


def only(responses: list[DeltaResponse]) -> DeltaResponse:
    assert len(responses) == 1, [(r.type_url, r.names, r.removed) for r in responses]
    return responses[0]


def digest(snap: Snapshot, type_url: str, name: str) -> str:
    return snap.of_type(type_url).resources[name].digest


def connect_envoy(stream: DeltaStream, snap: Snapshot) -> dict[str, DeltaResponse]:
    """Envoy's delta ADS start-up: wildcard CDS, EDS by name, wildcard LDS, RDS by name."""
    last = {}
    cds = only(stream.on_request(delta_request(CLUSTER, node=NODE), snap))
    last[CLUSTER] = cds
    eds = only(stream.on_request(delta_request(ENDPOINT, names_in(cds)), snap))
    last[ENDPOINT] = eds
    assert stream.on_request(delta_ack(cds), snap) == []
    lds = only(stream.on_request(delta_request(LISTENER), snap))
    last[LISTENER] = lds
    assert stream.on_request(delta_ack(eds), snap) == []
    rds = only(stream.on_request(delta_request(ROUTE, ["routes-http"]), snap))
    last[ROUTE] = rds
    assert stream.on_request(delta_ack(lds), snap) == []
    assert stream.on_request(delta_ack(rds), snap) == []
    stream.take_events()
    return last


# Stream identity.


# Responses and versions.


def test_delta_resource_versions_are_content_digests() -> None:
    snap = base_snapshot()
    response = only(DeltaStream().on_request(delta_request(CLUSTER, node=NODE), snap))
    assert versions_in(response) == {
        "a": digest(snap, CLUSTER, "a"),
        "b": digest(snap, CLUSTER, "b"),
    }
    message = response.message()
    assert message.nonce == response.nonce and message.type_url == CLUSTER
    assert message.system_version_info == snap.of_type(CLUSTER).version


# Subscriptions.


def test_delta_first_wildcard_request_is_answered_even_when_empty() -> None:
    # Envoy's initialization waits for the first CDS and LDS answers.
    response = only(DeltaStream().on_request(delta_request(CLUSTER, node=NODE), snapshot()))
    assert response.names == () and response.removed == () and response.nonce


def test_delta_explicit_names_only_those_are_sent() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["b"], node=NODE), snap))
    assert names_in(eds) == ["b"]
    changed = snapshot(assignments=[endpoints("a", "10.9.9.9"), endpoints("b", "10.0.0.2")])
    assert stream.on_snapshot(changed) == []


def test_delta_unsubscribe_stops_updates() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["a", "b"], node=NODE), snap))
    assert (
        stream.on_request(delta_request(ENDPOINT, unsubscribe=["b"], nonce=eds.nonce), snap) == []
    )
    changed = snapshot(assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.9.9.9")])
    assert stream.on_snapshot(changed) == []
    assert "b" not in stream.types[ENDPOINT].held


def test_delta_resubscribe_resends_unchanged_resource() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["a"], node=NODE), snap))
    stream.on_request(delta_ack(eds), snap)
    stream.on_request(delta_request(ENDPOINT, unsubscribe=["a"]), snap)
    again = only(stream.on_request(delta_request(ENDPOINT, ["a"]), snap))
    assert names_in(again) == ["a"]


def test_delta_subscribing_a_held_name_again_resends_it() -> None:
    # "MUST send resources named in resource_names_subscribe even if the server thinks the
    # client is up to date."
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["a"], node=NODE), snap))
    stream.on_request(delta_ack(eds), snap)
    assert names_in(only(stream.on_request(delta_request(ENDPOINT, ["a"]), snap))) == ["a"]


def test_delta_phantom_unsubscribe_is_ignored() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["a"], node=NODE), snap))
    stream.on_request(delta_ack(eds), snap)
    assert stream.on_request(delta_request(ENDPOINT, unsubscribe=["never"]), snap) == []
    assert stream.types[ENDPOINT].names == {"a"}


def test_delta_unsubscribing_a_name_also_covered_by_wildcard_resends_it() -> None:
    # The spec: either the resource or its entry in removed_resources must follow.
    stream = DeltaStream()
    snap = base_snapshot()
    cds = only(stream.on_request(delta_request(CLUSTER, ["*", "a", "ghost"], node=NODE), snap))
    assert cds.removed == ("ghost",)
    stream.on_request(delta_ack(cds), snap)
    response = only(stream.on_request(delta_request(CLUSTER, unsubscribe=["a", "ghost"]), snap))
    assert names_in(response) == ["a"]
    assert response.removed == ("ghost",)
    # Afterwards both are plain wildcard resources again: nothing more until they change.
    stream.on_request(delta_ack(response), snap)
    assert stream.on_snapshot(base_snapshot()) == []


def test_delta_names_that_do_not_exist_are_reported_removed_then_sent_when_they_appear() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["a", "later"], node=NODE), snap))
    assert names_in(eds) == ["a"] and eds.removed == ("later",)
    stream.on_request(delta_ack(eds), snap)
    # Reported once, not with every change.
    moved = snapshot(assignments=[endpoints("a", "10.0.0.7")])
    assert only(stream.on_snapshot(moved)).removed == ()
    appeared = snapshot(assignments=[endpoints("a", "10.0.0.7"), endpoints("later", "10.0.0.8")])
    assert names_in(only(stream.on_snapshot(appeared))) == ["later"]


def test_delta_deleted_resource_is_in_removed_resources() -> None:
    stream = DeltaStream()
    connect_envoy(stream, base_snapshot())
    fewer = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[],
        route_configs=[routes("routes-http", "a", "b")],
    )
    response = only(stream.on_snapshot(fewer))
    assert response.type_url == LISTENER and response.removed == ("http",)
    assert response.names == ()


# Reconnects.


def test_delta_initial_resource_versions_nothing_resent_that_the_client_has() -> None:
    snap = base_snapshot()
    held = {n: digest(snap, CLUSTER, n) for n in ("a", "b")}
    response = only(DeltaStream().on_request(delta_request(CLUSTER, initial=held, node=NODE), snap))
    assert response.names == () and response.removed == ()


def test_delta_initial_resource_versions_stale_resent_and_gone_removed() -> None:
    snap = base_snapshot()
    held = {"a": "old-version", "b": digest(snap, CLUSTER, "b"), "gone": "whatever"}
    response = only(DeltaStream().on_request(delta_request(CLUSTER, initial=held, node=NODE), snap))
    assert names_in(response) == ["a"]
    assert response.removed == ("gone",)


def test_delta_initial_resource_versions_with_explicit_names() -> None:
    snap = base_snapshot()
    held = {"a": digest(snap, ENDPOINT, "a")}
    stream = DeltaStream()
    response = only(
        stream.on_request(delta_request(ENDPOINT, ["a", "b"], initial=held, node=NODE), snap)
    )
    assert names_in(response) == ["b"]


def test_delta_initial_resource_versions_count_as_acked() -> None:
    # A reconnecting client holds what it accepted on its last stream: CSDS says so, and the
    # stream keeps no copy of its own of what every idle stream holds.
    snap = base_snapshot()
    held = {"a": digest(snap, CLUSTER, "a"), "b": "old-version"}
    stream = DeltaStream()
    response = only(stream.on_request(delta_request(CLUSTER, initial=held, node=NODE), snap))
    state = stream.types[CLUSTER]
    statuses = {s.name: (s.version, s.client_status, s.config_status) for s in
                state.resource_statuses(snap.of_type(CLUSTER))}  # fmt: skip
    assert statuses == {
        "a": (held["a"], ClientStatus.ACKED, ConfigStatus.SYNCED),
        "b": ("old-version", ClientStatus.ACKED, ConfigStatus.STALE),
    }
    stream.on_request(delta_ack(response), snap)
    assert {s.config_status for s in state.resource_statuses(snap.of_type(CLUSTER))} == {
        ConfigStatus.SYNCED
    }
    shared = stream.memos.digest_maps.digests_of(snap.of_type(CLUSTER))
    assert state.held.mapping is shared and state.acked.mapping is shared


def test_delta_initial_resource_versions_then_a_nack_keeps_what_the_client_held() -> None:
    # It reconnects holding an old "a", rejects the new one: it still runs the old one.
    snap = base_snapshot()
    held = {"a": "old-version", "b": digest(snap, CLUSTER, "b")}
    stream = DeltaStream()
    response = only(stream.on_request(delta_request(CLUSTER, initial=held, node=NODE), snap))
    assert names_in(response) == ["a"]
    assert stream.on_request(delta_nack(response, "bad cluster"), snap) == []
    state = stream.types[CLUSTER]
    statuses = {s.name: (s.version, s.client_status) for s in
                state.resource_statuses(snap.of_type(CLUSTER))}  # fmt: skip
    assert statuses == {
        "a": ("old-version", ClientStatus.NACKED),
        "b": (held["b"], ClientStatus.ACKED),
    }
    assert dict(state.held) == held  # what it runs, not what it refused


def test_delta_initial_resource_versions_all_current_shared_after_the_first_ack() -> None:
    snap = base_snapshot()
    held = {n: digest(snap, CLUSTER, n) for n in ("a", "b")}
    stream = DeltaStream()
    response = only(stream.on_request(delta_request(CLUSTER, initial=held, node=NODE), snap))
    stream.on_request(delta_ack(response), snap)
    state = stream.types[CLUSTER]
    shared = stream.memos.digest_maps.digests_of(snap.of_type(CLUSTER))
    assert state.held.mapping is shared and state.acked.mapping is shared
    assert {s.client_status for s in state.resource_statuses(snap.of_type(CLUSTER))} == {
        ClientStatus.ACKED
    }


# Nonces, ACK and NACK.


def test_delta_initial_resource_versions_of_names_not_subscribed_are_ignored() -> None:
    # The client subscribes to "a" only: whatever it says it holds of "b" is no request.
    snap = base_snapshot()
    held = {"a": "stale", "b": "old"}
    stream = DeltaStream()
    response = only(
        stream.on_request(delta_request(ENDPOINT, ["a"], initial=held, node=NODE), snap)
    )
    assert names_in(response) == ["a"] and response.removed == ()
    assert set(stream.types[ENDPOINT].held) == {"a"}
    # Nor does it come back later, when "b" changes.
    moved = snapshot(assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.9")])
    stream.on_request(delta_ack(response), snap)
    assert stream.on_snapshot(moved) == []


def test_delta_subscription_changes_honoured_even_with_stale_nonce() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["a"], node=NODE), snap))
    response = only(stream.on_request(delta_request(ENDPOINT, ["b"], nonce="stale-99"), snap))
    assert names_in(response) == ["b"]
    assert StaleRequest(ENDPOINT, "stale-99", eds.nonce) in stream.take_events()


def test_delta_spontaneous_request_without_nonce() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    only(stream.on_request(delta_request(ENDPOINT, ["a"], node=NODE), snap))
    response = only(stream.on_request(delta_request(ENDPOINT, ["b"]), snap))
    assert names_in(response) == ["b"]
    assert stream.take_events() == []


def test_delta_ack_records_versions_per_resource() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    cds = only(stream.on_request(delta_request(CLUSTER, node=NODE), snap))
    assert stream.types[CLUSTER].in_flight
    assert stream.on_request(delta_ack(cds), snap) == []
    state = stream.types[CLUSTER]
    assert not state.in_flight
    assert state.acked == versions_in(cds)
    assert state.acked_system_version == snap.of_type(CLUSTER).version
    assert stream.take_events() == [Ack(CLUSTER, snap.of_type(CLUSTER).version, cds.nonce)]


def test_delta_each_pipelined_response_is_acked_by_its_own_nonce() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    eds = only(stream.on_request(delta_request(ENDPOINT, ["a"], node=NODE), snap))
    more = only(stream.on_request(delta_request(ENDPOINT, ["b"]), snap))
    stream.on_request(delta_ack(more), snap)
    assert set(stream.types[ENDPOINT].acked) == {"b"}
    stream.on_request(delta_ack(eds), snap)
    assert set(stream.types[ENDPOINT].acked) == {"a", "b"}


def test_delta_nack_parks_the_rejected_resource_until_it_changes() -> None:
    stream = DeltaStream()
    snap = base_snapshot()
    connect_envoy(stream, snap)
    bad = snapshot(
        clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    cds, eds = stream.on_snapshot(bad)
    assert names_in(cds) == ["a"] and names_in(eds) == ["a"]
    stream.on_request(delta_ack(eds), bad)
    stream.take_events()
    assert stream.on_request(delta_nack(cds, "cluster a: bad timeout"), bad) == []
    state = stream.types[CLUSTER]
    nack = state.last_nack
    assert nack == Nack(
        type_url=CLUSTER,
        version=bad.of_type(CLUSTER).version,
        nonce=cds.nonce,
        message="cluster a: bad timeout",
        code=3,
        resource_names=("a",),
        kept_version="",
    )
    assert stream.take_events() == [nack]
    # The client kept its old "a".
    assert state.held["a"] == digest(snap, CLUSTER, "a")
    # Other changes still flow; the rejected content is not sent again.
    more = snapshot(
        clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b"), dns_cluster("x", "x.test")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    assert names_in(only(stream.on_snapshot(more))) == ["x"]
    # Fixed content goes out.
    fixed = snapshot(
        clusters=[eds_cluster("a", timeout_s=2), eds_cluster("b"), dns_cluster("x", "x.test")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    cds_fixed = stream.on_snapshot(fixed)[0]
    assert names_in(cds_fixed) == ["a"]
    assert "a" not in stream.types[CLUSTER].rejected


# ADS ordering.


def test_delta_removals_come_after_additions_and_wait_for_new_routes() -> None:
    stream = DeltaStream()
    connect_envoy(stream, base_snapshot())
    moved = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("c", "10.0.0.3")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "c")],
    )
    cds = only(stream.on_snapshot(moved))
    assert (cds.type_url, cds.names, cds.removed) == (CLUSTER, ("c",), ())
    # Envoy asks for the new cluster's CLA, then ACKs the clusters: "c" still warming.
    eds = only(stream.on_request(delta_request(ENDPOINT, ["c"]), moved))
    assert names_in(eds) == ["c"]
    assert stream.on_request(delta_ack(cds), moved) == []
    # Its CLA ACKed: the routes naming "c" go.
    rds = only(stream.on_request(delta_ack(eds), moved))
    assert (rds.type_url, rds.names) == (ROUTE, ("routes-http",))
    # The new routes are ACKed: now "b" goes, cluster first, then its endpoints.
    removals = stream.on_request(delta_ack(rds), moved)
    assert [(r.type_url, r.names, r.removed) for r in removals] == [
        (CLUSTER, (), ("b",)),
        (ENDPOINT, (), ("b",)),
    ]


def test_delta_per_type_stream_sends_additions_and_removals_together() -> None:
    stream = DeltaStream(CLUSTER)
    snap = base_snapshot()
    cds = only(stream.on_request(delta_request(CLUSTER, node=NODE), snap))
    stream.on_request(delta_ack(cds), snap)
    swapped = snapshot(clusters=[eds_cluster("a"), eds_cluster("c")])
    response = only(stream.on_snapshot(swapped))
    assert (response.names, response.removed) == (("c",), ("b",))


def test_delta_request_never_overtakes_ads_order_of_a_newer_snapshot() -> None:
    stream = DeltaStream()
    connect_envoy(stream, base_snapshot())
    newer = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2"), endpoints("c")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b", "c")],
    )
    responses = stream.on_request(delta_request(ROUTE, ["other"]), newer)
    assert [r.type_url for r in responses] == [ROUTE, CLUSTER]  # routes once "c" is warm
    assert responses[0].removed == ("other",)  # answered from the snapshot it already served


def test_delta_idle_wildcard_streams_share_the_snapshot_digest_map_and_diff() -> None:
    snap = snapshot(clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")])
    memos = StreamMemos()
    streams = [DeltaStream(CLUSTER, memos) for _ in range(3)]
    for stream in streams:
        stream.on_request(delta_ack(only(stream.on_request(delta_request(CLUSTER), snap))), snap)
    held = [stream.types[CLUSTER].held.mapping for stream in streams]
    assert held[0] is held[1] is held[2]  # one shared map, not three copies
    assert dict(held[0]) == {n: r.digest for n, r in snap.of_type(CLUSTER).resources.items()}
    changed = snapshot(clusters=[eds_cluster("a", timeout_s=7), eds_cluster("c"), eds_cluster("d")])
    pushed = [only(stream.on_snapshot(changed)) for stream in streams]
    for response in pushed:
        assert (response.names, response.removed) == (("a", "d"), ("b",))
        assert response.to_bytes() is pushed[0].to_bytes()
    for stream, response in zip(streams, pushed, strict=True):
        stream.on_request(delta_ack(response), changed)
        assert stream.types[CLUSTER].held.mapping is streams[0].types[CLUSTER].held.mapping


# Pushes from the shared diff.


def test_a_stream_subscribing_by_name_is_pushed_the_shared_diff_as_it_would_be_name_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Envoy subscribes to every cluster's CLA by name: once it holds them all, a push is
    the diff computed once for every such stream, and says exactly what planning name by
    name would (names subscribed that do not exist, removed ones, ones coming back, new ones
    it does not subscribe to)."""
    rng = random.Random(11)
    names = [f"cla-{i:02d}" for i in range(24)]
    strays = [f"stray-{i}" for i in range(3)]  # never subscribed
    present = {name: f"10.0.0.{i}" for i, name in enumerate(names[:20])}

    def made() -> Snapshot:
        return snapshot(assignments=[endpoints(n, ip) for n, ip in sorted(present.items())])

    real_plan = delta_stream._plan_from_shared_map
    shared_plans = []

    def counted(*args: object) -> object:
        plan = real_plan(*args)  # type: ignore[arg-type]
        shared_plans.append(plan is not None)
        return plan

    def name_by_name(call: Callable[[], list[DeltaResponse]]) -> list[DeltaResponse]:
        with monkeypatch.context() as patched:
            patched.setattr(delta_stream, "_plan_from_shared_map", lambda *args: None)
            return call()

    monkeypatch.setattr(delta_stream, "_plan_from_shared_map", counted)
    memos = StreamMemos()
    fast, reference = DeltaStream(memos=memos), DeltaStream(memos=memos)
    snap = made()
    # Four of the names subscribed do not exist yet.
    subscribing = delta_request(ENDPOINT, names, node=NODE)
    for stream in (fast, reference):
        (first,) = stream.on_request(subscribing, snap)
        assert stream.on_request(delta_ack(first), snap) == []
    for _ in range(40):
        for stray in strays:  # in one snapshot only
            present.pop(stray, None)
        for name in rng.sample(names, 3):
            if name in present and rng.random() < 0.3:
                del present[name]
            else:
                present[name] = f"10.1.{rng.randrange(256)}.{rng.randrange(256)}"
        if rng.random() < 0.3:
            present[rng.choice(strays)] = "10.2.0.1"
        snap = made()
        pushed = fast.on_snapshot(snap)
        expected = name_by_name(lambda: reference.on_snapshot(snap))  # noqa: B023
        assert [(r.names, r.removed, r.to_bytes()) for r in pushed] == [
            (r.names, r.removed, r.to_bytes()) for r in expected
        ]
        for response, twin in zip(pushed, expected, strict=True):
            assert fast.on_request(delta_ack(response), snap) == []
            assert name_by_name(lambda: reference.on_request(delta_ack(twin), snap)) == []  # noqa: B023
    # Most pushes took the shared diff: not those while a stray name was in the snapshot.
    assert sum(shared_plans) >= 20
