"""The SotW stream state machine, driven without a network the way Envoy and gRPC drive it.

Each test is named after the protocol rule it checks (see the xDS protocol reference).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from envoy.config.core.v3.base_pb2 import Node

from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from dragoman.xds.protocol.events import Ack, Nack, StaleRequest
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.stream_protocol import StreamMemos
from dragoman.xds.protocol.wire import SotwResponse
from tests.support.xds_builders import (
    ack,
    dns_cluster,
    eds_cluster,
    endpoints,
    listener,
    nack,
    names_in,
    request,
    routes,
    snapshot,
)

NODE = Node(id="envoy-1", cluster="default/gateway")
GRPC_NODE = Node(id="grpc-1", user_agent_name="gRPC C-core linux Python")


def base_snapshot() -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )


def only(responses: list[SotwResponse]) -> SotwResponse:
    assert len(responses) == 1, [r.type_url for r in responses]
    return responses[0]


def connect_envoy(stream: SotwStream, snap: Snapshot) -> dict[str, SotwResponse]:
    """Envoy's ADS start-up: wildcard CDS, EDS by name, wildcard LDS, RDS by name, all ACKed."""
    last = {}
    cds = only(stream.on_request(request(CLUSTER, node=NODE), snap))
    last[CLUSTER] = cds
    cluster_names = names_in(cds)
    eds = only(stream.on_request(request(ENDPOINT, cluster_names), snap))
    last[ENDPOINT] = eds
    assert stream.on_request(ack(cds), snap) == []
    lds = only(stream.on_request(request(LISTENER), snap))
    last[LISTENER] = lds
    assert stream.on_request(ack(eds, cluster_names), snap) == []
    rds = only(stream.on_request(request(ROUTE, ["routes-http"]), snap))
    last[ROUTE] = rds
    assert stream.on_request(ack(lds), snap) == []
    assert stream.on_request(ack(rds, ["routes-http"]), snap) == []
    stream.take_events()
    return last


# Stream identity and type_url.


def test_single_type_stream_accepts_empty_type_url_as_its_own() -> None:
    stream = SotwStream(CLUSTER)
    response = only(stream.on_request(request("", node=NODE), base_snapshot()))
    assert response.type_url == CLUSTER
    assert names_in(response) == ["a", "b"]


# Responses, ACK and NACK.


def test_initial_request_gets_version_nonce_and_resources() -> None:
    snap = base_snapshot()
    response = only(SotwStream().on_request(request(CLUSTER, node=NODE), snap))
    assert response.type_url == CLUSTER
    assert response.version_info == snap.of_type(CLUSTER).version
    assert response.nonce
    assert names_in(response) == ["a", "b"]


def test_version_info_is_the_type_snapshot_version() -> None:
    snap = base_snapshot()
    stream = SotwStream()
    responses = connect_envoy(stream, snap)
    for type_url, response in responses.items():
        assert response.version_info == snap.of_type(type_url).version


def test_ack_records_acked_version_and_sends_nothing() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    cds = only(stream.on_request(request(CLUSTER, node=NODE), snap))
    assert stream.types[CLUSTER].in_flight
    assert stream.on_request(ack(cds), snap) == []
    state = stream.types[CLUSTER]
    assert not state.in_flight
    assert state.acked_version == cds.version_info
    assert state.sent_digests == {
        name: r.digest for name, r in snap.of_type(CLUSTER).resources.items()
    }
    assert stream.take_events() == [Ack(CLUSTER, cds.version_info, cds.nonce)]


def test_nonces_come_from_one_counter_per_stream() -> None:
    stream = SotwStream()
    responses = connect_envoy(stream, base_snapshot())
    nonces = [responses[t].nonce for t in (CLUSTER, ENDPOINT, LISTENER, ROUTE)]
    assert len(set(nonces)) == 4


def test_nack_detected_by_error_detail_is_recorded_and_not_resent() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    connect_envoy(stream, snap)
    bad = snapshot(
        clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    cds, eds = stream.on_snapshot(bad)
    stream.on_request(ack(eds, ["a", "b"]), bad)
    stream.take_events()
    # The NACK carries the old accepted version: only error_detail tells it apart.
    old_version = snap.of_type(CLUSTER).version
    assert stream.on_request(nack(cds, "bad timeout", kept_version=old_version), bad) == []
    state = stream.types[CLUSTER]
    assert state.last_nack == Nack(
        type_url=CLUSTER,
        version=cds.version_info,
        nonce=cds.nonce,
        message="bad timeout",
        code=3,
        resource_names=("a", "b"),
        kept_version=old_version,
    )
    assert stream.take_events() == [state.last_nack]
    # Same content again (an equal snapshot, a new object): no NACK ping-pong.
    assert stream.on_snapshot(Snapshot(types=dict(bad.types))) == []
    assert (
        stream.on_request(
            request(CLUSTER, version=old_version, nonce=cds.nonce, error="bad timeout"), bad
        )
        == []
    )


def test_nack_then_new_content_is_sent() -> None:
    stream = SotwStream(CLUSTER)
    snap = snapshot(clusters=[eds_cluster("a")])
    stream.on_request(ack(only(stream.on_request(request(CLUSTER, node=NODE), snap))), snap)
    bad = snapshot(clusters=[eds_cluster("a", timeout_s=99)])
    cds = only(stream.on_snapshot(bad))
    stream.on_request(nack(cds, "bad"), bad)
    fixed = snapshot(clusters=[eds_cluster("a", timeout_s=2)])
    response = only(stream.on_snapshot(fixed))
    assert names_in(response) == ["a"]
    assert response.version_info == fixed.of_type(CLUSTER).version
    assert stream.types[CLUSTER].rejected_version is None
    assert stream.types[CLUSTER].last_nack is not None  # still shown until replaced


def test_nack_on_eds_does_not_block_newly_requested_resources() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    eds = only(stream.on_request(request(ENDPOINT, ["a"], node=NODE), snap))
    assert stream.on_request(nack(eds, "bad endpoints", ["a"]), snap) == []
    response = only(stream.on_request(nack(eds, "bad endpoints", ["a", "b"]), snap))
    assert names_in(response) == ["b"]


def test_nack_on_eds_then_other_change_sends_only_what_changed() -> None:
    # "a" and "b" were rejected; only "b" changes: "a" is the same rejected content and is
    # not sent again (each resend would be one more NACK), "b" is new content.
    stream = SotwStream()
    snap = base_snapshot()
    eds = only(stream.on_request(request(ENDPOINT, ["a", "b"], node=NODE), snap))
    stream.on_request(nack(eds, "bad", ["a", "b"]), snap)
    changed = snapshot(assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.9")])
    assert names_in(only(stream.on_snapshot(changed))) == ["b"]


def test_rejected_eds_content_is_not_resent_on_unrelated_changes_until_it_changes() -> None:
    stream = SotwStream()
    good = snapshot(assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")])
    first = only(stream.on_request(request(ENDPOINT, ["a", "b"], node=NODE), good))
    stream.on_request(ack(first, ["a", "b"]), good)
    bad = snapshot(assignments=[endpoints("a", "10.0.0.99"), endpoints("b", "10.0.0.2")])
    pushed = only(stream.on_snapshot(bad))
    assert names_in(pushed) == ["a"]
    stream.on_request(nack(pushed, "a is bad", ["a", "b"]), bad)
    # Two unrelated changes to "b": "a" (still the rejected content) never comes back.
    for address in ("10.0.0.3", "10.0.0.4"):
        other = snapshot(assignments=[endpoints("a", "10.0.0.99"), endpoints("b", address)])
        response = only(stream.on_snapshot(other))
        assert names_in(response) == ["b"]
        stream.on_request(ack(response, ["a", "b"]), other)
    # "a" changes: its new content is sent.
    fixed = snapshot(assignments=[endpoints("a", "10.0.0.5"), endpoints("b", "10.0.0.4")])
    assert names_in(only(stream.on_snapshot(fixed))) == ["a"]


@pytest.mark.parametrize("type_url", [CLUSTER, LISTENER], ids=["cds", "lds"])
def test_nack_on_lds_cds_does_not_block_newly_requested_names(type_url: str) -> None:
    # gRPC asks for each new xds:/// target (LDS) and cluster (CDS) by name: after a NACK,
    # a new name must still be answered, or the client's call waits 15 s and fails.
    def make(timeout_s: int) -> Snapshot:
        if type_url == CLUSTER:
            return snapshot(clusters=[eds_cluster("a", timeout_s=timeout_s), eds_cluster("b")])
        return snapshot(listeners=[listener("a", f"routes-{timeout_s}"), listener("b", "r")])

    stream = SotwStream()
    first = make(1)
    accepted = only(stream.on_request(request(type_url, ["a"], node=GRPC_NODE), first))
    assert stream.on_request(ack(accepted, ["a"]), first) == []
    bad = make(99)
    pushed = only(stream.on_snapshot(bad))
    kept = accepted.version_info
    assert stream.on_request(nack(pushed, "bad", ["a"], kept_version=kept), bad) == []
    more = request(type_url, ["a", "b"], version=kept, nonce=pushed.nonce)
    response = only(stream.on_request(more, bad))
    # The whole subscribed set, the rejected resource included: clients keep what is valid.
    assert names_in(response) == ["a", "b"]
    assert response.version_info == bad.of_type(type_url).version
    # Rejected again: nothing more until the content or the subscription changes.
    again = nack(response, "bad", ["a", "b"], kept_version=kept)
    assert stream.on_request(again, bad) == []
    assert (
        stream.on_request(request(type_url, ["a", "b"], version=kept, nonce=response.nonce), bad)
        == []
    )


def test_an_ack_of_content_rejected_earlier_lifts_the_rejection() -> None:
    stream = SotwStream()
    first = snapshot(clusters=[eds_cluster("a"), eds_cluster("b")])
    accepted = only(stream.on_request(request(CLUSTER, ["a"], node=GRPC_NODE), first))
    stream.on_request(ack(accepted, ["a"]), first)
    bad = snapshot(clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b")])
    pushed = only(stream.on_snapshot(bad))
    stream.on_request(nack(pushed, "bad", ["a"], kept_version=accepted.version_info), bad)
    assert stream.types[CLUSTER].rejected_version == bad.of_type(CLUSTER).version
    more = request(CLUSTER, ["a", "b"], version=accepted.version_info, nonce=pushed.nonce)
    response = only(stream.on_request(more, bad))
    stream.on_request(ack(response, ["a", "b"]), bad)
    state = stream.types[CLUSTER]
    assert state.rejected_version is None and state.rejected_names == frozenset()
    assert state.acked_version == bad.of_type(CLUSTER).version


def test_resubscribing_a_rejected_eds_name_resends_it() -> None:
    # "Re-subscribe: resent even if unchanged", even content the client rejected before.
    stream = SotwStream()
    first = snapshot(assignments=[endpoints("a", "10.0.0.1")])
    accepted = only(stream.on_request(request(ENDPOINT, ["a"], node=NODE), first))
    stream.on_request(ack(accepted, ["a"]), first)
    moved = snapshot(assignments=[endpoints("a", "10.0.0.2")])
    pushed = only(stream.on_snapshot(moved))
    kept = accepted.version_info
    stream.on_request(nack(pushed, "bad", ["a"], kept_version=kept), moved)
    assert stream.on_request(request(ENDPOINT, [], version=kept, nonce=pushed.nonce), moved) == []
    again = only(
        stream.on_request(request(ENDPOINT, ["a"], version=kept, nonce=pushed.nonce), moved)
    )
    assert names_in(again) == ["a"]
    assert again.version_info == moved.of_type(ENDPOINT).version


def test_a_snapshot_without_a_type_answers_and_pushes_nothing_of_it() -> None:
    # Snapshot(): what a group whose snapshot cannot be made is served (the cache's
    # UNAVAILABLE). Clients keep what they hold; no empty LDS/CDS deletes it.
    stream = SotwStream()
    snap = base_snapshot()
    connect_envoy(stream, snap)
    assert stream.on_snapshot(Snapshot()) == []
    fresh = SotwStream()
    assert fresh.on_request(request(LISTENER, node=NODE), Snapshot()) == []
    assert fresh.on_request(request(CLUSTER), Snapshot()) == []
    # Once there is a snapshot again, what was asked for is answered: the listeners once
    # the clusters are warm.
    assert [r.type_url for r in fresh.on_snapshot(snap)] == [CLUSTER]


def test_stale_nonce_request_is_ignored() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    eds = only(stream.on_request(request(ENDPOINT, ["a"], node=NODE), snap))
    stale = request(ENDPOINT, ["a", "b"], nonce="not-" + eds.nonce)
    assert stream.on_request(stale, snap) == []
    assert stream.types[ENDPOINT].names == {"a"}
    assert stream.types[ENDPOINT].in_flight
    assert stream.take_events() == [StaleRequest(ENDPOINT, "not-" + eds.nonce, eds.nonce)]


def test_first_request_has_no_nonce_and_is_accepted() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    assert stream.on_request(request(ENDPOINT, [], node=NODE), snap) == []
    # Until a response is sent no request can be stale: later nonce-less requests count.
    assert names_in(only(stream.on_request(request(ENDPOINT, ["a"]), snap))) == ["a"]


def test_push_while_in_flight_makes_the_older_ack_stale() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    eds = only(stream.on_request(request(ENDPOINT, ["a"], node=NODE), snap))
    newer = snapshot(assignments=[endpoints("a", "10.0.0.7")])
    pushed = only(stream.on_snapshot(newer))
    assert pushed.nonce != eds.nonce
    assert stream.on_request(ack(eds, ["a"]), newer) == []
    assert stream.types[ENDPOINT].acked_version == ""
    assert stream.on_request(ack(pushed, ["a"]), newer) == []
    assert stream.types[ENDPOINT].acked_version == pushed.version_info


# Subscriptions.


def test_empty_names_after_names_unsubscribes_all() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    eds = only(stream.on_request(request(ENDPOINT, ["a", "b"], node=NODE), snap))
    assert stream.on_request(ack(eds, []), snap) == []
    state = stream.types[ENDPOINT]
    assert state.names == set() and not state.wildcard and state.sent == {}
    changed = snapshot(assignments=[endpoints("a", "10.9.9.9"), endpoints("b", "10.9.9.8")])
    assert stream.on_snapshot(changed) == []


def test_new_subscription_on_lds_cds_sends_full_state() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    cds = only(stream.on_request(request(CLUSTER, ["a"], node=NODE), snap))
    assert names_in(cds) == ["a"]
    assert names_in(only(stream.on_request(ack(cds, ["a", "b"]), snap))) == ["a", "b"]


def test_names_that_do_not_exist_yet_are_sent_when_they_appear() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    eds = only(stream.on_request(request(ENDPOINT, ["a", "later"], node=NODE), snap))
    assert names_in(eds) == ["a"]
    stream.on_request(ack(eds, ["a", "later"]), snap)
    appeared = snapshot(
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2"), endpoints("later")]
    )
    assert names_in(only(stream.on_snapshot(appeared))) == ["later"]


def test_requested_names_that_do_not_exist_get_no_empty_eds_response() -> None:
    stream = SotwStream()
    assert stream.on_request(request(ENDPOINT, ["ghost"], node=NODE), base_snapshot()) == []


def test_explicit_lds_cds_names_that_do_not_exist_get_a_full_state_answer() -> None:
    # gRPC learns at once that the listener is absent instead of waiting for its timer.
    stream = SotwStream()
    response = only(stream.on_request(request(LISTENER, ["ghost"], node=NODE), base_snapshot()))
    assert names_in(response) == []


# SotW response content.


def test_full_state_lds_cds_deletion_sends_remaining_set() -> None:
    stream = SotwStream()
    connect_envoy(stream, base_snapshot())
    fewer = snapshot(
        clusters=[eds_cluster("a")],
        assignments=[endpoints("a", "10.0.0.1")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    response = only(stream.on_snapshot(fewer))
    assert response.type_url == CLUSTER
    assert names_in(response) == ["a"]


def test_full_state_all_deleted_sends_empty_response() -> None:
    stream = SotwStream(LISTENER)
    snap = base_snapshot()
    lds = only(stream.on_request(request(LISTENER, node=NODE), snap))
    stream.on_request(ack(lds), snap)
    response = only(stream.on_snapshot(snapshot()))
    assert response.type_url == LISTENER and names_in(response) == []


def test_eds_rds_send_only_changed_resources() -> None:
    stream = SotwStream()
    connect_envoy(stream, base_snapshot())
    changed = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.3")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    response = only(stream.on_snapshot(changed))
    assert response.type_url == ENDPOINT
    assert names_in(response) == ["b"]


def with_endpoints(snap: Snapshot, *changed: Resource) -> Snapshot:
    """`snap` with these CLAs in place of those of their names, as translation makes it when
    only endpoints changed (the EDS snapshot derived from the one before)."""
    derived = snap.of_type(ENDPOINT).replaced({r.name: r for r in changed})
    return Snapshot(types={**snap.types, ENDPOINT: derived})


def test_eds_derived_from_what_the_client_holds_sends_what_changed_in_it() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    connect_envoy(stream, snap)
    for address in ("10.0.0.3", "10.0.0.4"):
        snap = with_endpoints(snap, endpoints("b", address))
        response = only(stream.on_snapshot(snap))
        assert (
            names_in(response) == ["b"] and response.version_info == snap.of_type(ENDPOINT).version
        )
        assert stream.on_request(ack(response, ["a", "b"]), snap) == []
        # Holding all of it, the stream holds the snapshot's own mapping, no copy.
        assert stream.types[ENDPOINT].sent.mapping is snap.of_type(ENDPOINT).resources
    # A snapshot derived from one the stream never saw: compared in full.
    skipped = with_endpoints(snap, endpoints("a", "10.0.0.5"))
    latest = with_endpoints(skipped, endpoints("b", "10.0.0.6"))
    assert names_in(only(stream.on_snapshot(latest))) == ["a", "b"]


def test_eds_derived_after_a_nack_keeps_rejected_content_back() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    connect_envoy(stream, snap)
    bad = with_endpoints(snap, endpoints("a", "10.0.0.99"))
    pushed = only(stream.on_snapshot(bad))
    stream.on_request(nack(pushed, "a is bad", ["a", "b"]), bad)
    other = with_endpoints(bad, endpoints("b", "10.0.0.3"))
    assert names_in(only(stream.on_snapshot(other))) == ["b"]
    fixed = with_endpoints(other, endpoints("a", "10.0.0.5"))
    assert names_in(only(stream.on_snapshot(fixed))) == ["a"]


def test_eds_rds_never_push_an_empty_no_op_response() -> None:
    stream = SotwStream()
    connect_envoy(stream, base_snapshot())
    # A CLA nobody subscribed appears: the EDS version changes but nothing is pushed.
    extra = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2"), endpoints("x")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b"), routes("unused", "a")],
    )
    assert stream.on_snapshot(extra) == []


def test_eds_rds_removed_resource_is_not_announced() -> None:
    stream = SotwStream(ENDPOINT)
    snap = base_snapshot()
    eds = only(stream.on_request(request(ENDPOINT, ["a", "b"], node=NODE), snap))
    stream.on_request(ack(eds, ["a", "b"]), snap)
    assert stream.on_snapshot(snapshot(assignments=[endpoints("a", "10.0.0.1")])) == []


def test_versions_equal_across_two_streams_fed_the_same_snapshot() -> None:
    # Content-hash versions: a restarted server (a new stream, a rebuilt snapshot) sends the
    # same versions and byte-identical resources.
    first, second = SotwStream(), SotwStream()
    a = connect_envoy(first, base_snapshot())
    b = connect_envoy(second, base_snapshot())
    for type_url in (CLUSTER, ENDPOINT, LISTENER, ROUTE):
        assert a[type_url].version_info == b[type_url].version_info
        assert a[type_url].to_bytes() == b[type_url].to_bytes()


# Reconnects.


def test_reconnect_wildcard_cds_at_current_version_is_not_answered() -> None:
    snap = base_snapshot()
    version = snap.of_type(CLUSTER).version
    stream = SotwStream()
    assert stream.on_request(request(CLUSTER, version=version, node=NODE), snap) == []
    state = stream.types[CLUSTER]
    assert state.acked_version == version and set(state.sent) == {"a", "b"}
    # The stream still pushes the next change.
    grown = snapshot(clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")])
    assert names_in(only(stream.on_snapshot(grown))) == ["a", "b", "c"]


def test_reconnect_with_an_older_version_is_answered() -> None:
    stream = SotwStream()
    response = only(
        stream.on_request(request(LISTENER, version="0123456789abcdef", node=NODE), base_snapshot())
    )
    assert names_in(response) == ["http"]


def test_reconnect_with_explicit_names_is_answered_even_at_current_version() -> None:
    snap = base_snapshot()
    stream = SotwStream()
    eds_version = snap.of_type(ENDPOINT).version
    eds = only(stream.on_request(request(ENDPOINT, ["a"], version=eds_version, node=NODE), snap))
    assert names_in(eds) == ["a"]
    lds_version = snap.of_type(LISTENER).version
    lds = only(stream.on_request(request(LISTENER, ["http"], version=lds_version), snap))
    assert names_in(lds) == ["http"]


# ADS ordering.


def test_ads_routes_naming_a_new_cluster_wait_until_it_is_warm() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    connect_envoy(stream, snap)
    grown = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2"), endpoints("c")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b", "c")],
    )
    # The new cluster alone: a route naming it now would answer 503 NC until "c" warms.
    cds = only(stream.on_snapshot(grown))
    assert cds.type_url == CLUSTER
    # Envoy asks for the new cluster's CLA, then ACKs the clusters: still warming.
    eds_nonce = stream.types[ENDPOINT].nonce
    eds = only(stream.on_request(request(ENDPOINT, ["a", "b", "c"], nonce=eds_nonce), grown))
    assert names_in(eds) == ["c"]
    assert stream.on_request(ack(cds), grown) == []
    # Its CLA ACKed: "c" is warm, the routes naming it go.
    rds = only(stream.on_request(ack(eds, ["a", "b", "c"]), grown))
    assert rds.type_url == ROUTE and names_in(rds) == ["routes-http"]


def test_request_never_overtakes_ads_order_of_a_newer_snapshot() -> None:
    stream = SotwStream()
    snap = base_snapshot()
    connect_envoy(stream, snap)
    newer = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2"), endpoints("c")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b", "c")],
    )
    # An RDS request arrives before the stream saw the newer snapshot: clusters still go
    # first, and the routes once the new cluster is warm.
    rds_state = stream.types[ROUTE]
    responses = stream.on_request(request(ROUTE, ["routes-http"], nonce=rds_state.nonce), newer)
    assert [r.type_url for r in responses] == [CLUSTER]


def test_cla_resent_under_its_service_name_after_cds_change() -> None:
    stream = SotwStream()
    snap = snapshot(
        clusters=[eds_cluster("a", "svc-a")], assignments=[endpoints("svc-a", "1.1.1.1")]
    )
    cds = only(stream.on_request(request(CLUSTER, node=NODE), snap))
    eds = only(stream.on_request(request(ENDPOINT, ["svc-a"]), snap))
    stream.on_request(ack(cds), snap)
    stream.on_request(ack(eds, ["svc-a"]), snap)
    changed = snapshot(
        clusters=[eds_cluster("a", "svc-a", timeout_s=4)],
        assignments=[endpoints("svc-a", "1.1.1.1")],
    )
    _, resent = stream.on_snapshot(changed)
    assert names_in(resent) == ["svc-a"]


def test_cla_not_resent_when_only_a_dns_cluster_changes() -> None:
    stream = SotwStream()
    snap = snapshot(
        clusters=[eds_cluster("a"), dns_cluster("ext", "example.com")],
        assignments=[endpoints("a", "10.0.0.1")],
    )
    cds = only(stream.on_request(request(CLUSTER, node=NODE), snap))
    eds = only(stream.on_request(request(ENDPOINT, ["a"]), snap))
    stream.on_request(ack(cds), snap)
    stream.on_request(ack(eds, ["a"]), snap)
    changed = snapshot(
        clusters=[eds_cluster("a"), dns_cluster("ext", "example.org")],
        assignments=[endpoints("a", "10.0.0.1")],
    )
    assert [r.type_url for r in stream.on_snapshot(changed)] == [CLUSTER]


def test_removed_clusters_kept_until_new_routes_are_acked() -> None:
    stream = SotwStream()
    connect_envoy(stream, base_snapshot())
    # Routes move from "b" to the new "c"; "b" must outlive the routes that name it.
    moved = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("c")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("c", "10.0.0.3")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "c")],
    )
    cds = only(stream.on_snapshot(moved))
    assert names_in(cds) == ["a", "b", "c"]
    assert cds.version_info != moved.of_type(CLUSTER).version  # not the final state
    eds_nonce = stream.types[ENDPOINT].nonce
    eds = only(stream.on_request(request(ENDPOINT, ["a", "b", "c"], nonce=eds_nonce), moved))
    assert names_in(eds) == ["c"]
    assert stream.on_request(ack(cds), moved) == []
    # "c" warm: the routes naming it go; "b" is still held.
    rds = only(stream.on_request(ack(eds, ["a", "b", "c"]), moved))
    assert rds.type_url == ROUTE
    # The new routes are ACKed: now the final CDS removes "b".
    final = only(stream.on_request(ack(rds, ["routes-http"]), moved))
    assert final.type_url == CLUSTER
    assert names_in(final) == ["a", "c"]
    assert final.version_info == moved.of_type(CLUSTER).version


def test_removed_clusters_kept_while_new_routes_are_rejected() -> None:
    stream = SotwStream()
    connect_envoy(stream, base_snapshot())
    moved = snapshot(
        clusters=[eds_cluster("a")],
        assignments=[endpoints("a", "10.0.0.1")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a")],
    )
    # The client holds "a" and "b" already: nothing to send for CDS yet.
    rds = only(stream.on_snapshot(moved))
    assert rds.type_url == ROUTE
    assert set(stream.types[CLUSTER].retained) == {"b"}
    assert stream.on_request(nack(rds, "bad route", ["routes-http"]), moved) == []
    assert set(stream.types[CLUSTER].retained) == {"b"}


def test_removed_clusters_wait_for_routes_of_a_renamed_listener_route_config() -> None:
    stream = SotwStream()
    connect_envoy(stream, base_snapshot())
    renamed = snapshot(
        clusters=[eds_cluster("a")],
        assignments=[endpoints("a", "10.0.0.1")],
        listeners=[listener("http", "routes-v2")],
        route_configs=[routes("routes-v2", "a")],
    )
    lds = only(stream.on_snapshot(renamed))
    assert lds.type_url == LISTENER
    # The listener is ACKed, but its new route config has not even been requested yet.
    assert stream.on_request(ack(lds), renamed) == []
    rds_nonce = stream.types[ROUTE].nonce
    rds = only(stream.on_request(request(ROUTE, ["routes-v2"], nonce=rds_nonce), renamed))
    final = only(stream.on_request(ack(rds, ["routes-v2"]), renamed))
    assert names_in(final) == ["a"]


# Whole conversations.


def test_proxyless_grpc_explicit_names_for_every_type() -> None:
    snap = snapshot(
        clusters=[eds_cluster("backend")],
        assignments=[endpoints("backend", "10.1.0.1")],
        listeners=[listener("greeter:50051", "greeter-routes")],
        route_configs=[routes("greeter-routes", "backend")],
    )
    stream = SotwStream()
    grpc_node = Node(id="grpc-client", cluster="")
    lds = only(stream.on_request(request(LISTENER, ["greeter:50051"], node=grpc_node), snap))
    assert names_in(lds) == ["greeter:50051"]
    assert stream.on_request(ack(lds, ["greeter:50051"]), snap) == []
    rds = only(stream.on_request(request(ROUTE, ["greeter-routes"]), snap))
    cds = only(stream.on_request(request(CLUSTER, ["backend"]), snap))
    assert stream.on_request(ack(rds, ["greeter-routes"]), snap) == []
    eds = only(stream.on_request(request(ENDPOINT, ["backend"]), snap))
    assert stream.on_request(ack(cds, ["backend"]), snap) == []
    assert stream.on_request(ack(eds, ["backend"]), snap) == []
    assert names_in(eds) == ["backend"]
    assert not any(state.wildcard for state in stream.types.values())
    # A new endpoint reaches the client without it asking.
    moved = snapshot(
        clusters=[eds_cluster("backend")],
        assignments=[endpoints("backend", "10.1.0.2")],
        listeners=[listener("greeter:50051", "greeter-routes")],
        route_configs=[routes("greeter-routes", "backend")],
    )
    assert [r.type_url for r in stream.on_snapshot(moved)] == [ENDPOINT]


class CountedMapping(Mapping[str, Resource]):
    """A type snapshot's resources that count every lookup and walk made of them."""

    def __init__(self, resources: Mapping[str, Resource]) -> None:
        self._resources = dict(resources)
        self.reads = 0

    def __getitem__(self, name: str) -> Resource:
        self.reads += 1
        return self._resources[name]

    def __iter__(self) -> Iterator[str]:
        self.reads += len(self._resources)
        return iter(self._resources)

    def __len__(self) -> int:
        return len(self._resources)


def counted_clusters(snap: Snapshot) -> tuple[Snapshot, CountedMapping]:
    clusters = snap.of_type(CLUSTER)
    counted = CountedMapping(clusters.resources)
    typed = TypeSnapshot(resources=counted, version=clusters.version)
    return Snapshot(types={**snap.types, CLUSTER: typed}), counted


def many_clusters(timeout_of_first: int) -> Snapshot:
    clusters = [
        eds_cluster(f"c{i}", timeout_s=timeout_of_first if i == 0 else 1) for i in range(50)
    ]
    return snapshot(
        clusters=clusters,
        assignments=[endpoints(f"c{i}", "10.0.0.1") for i in range(50)],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "c0")],
    )


def reads_of_held_clusters_for_one_change(streams: int) -> int:
    held, counted = counted_clusters(many_clusters(1))
    memos = StreamMemos()
    connected = [SotwStream(memos=memos) for _ in range(streams)]
    for stream in connected:
        connect_envoy(stream, held)
    counted.reads = 0
    changed = many_clusters(2)
    for stream in connected:
        cds, eds = stream.on_snapshot(changed)
        assert names_in(eds) == ["c0"]  # the changed EDS cluster's CLA follows its CDS
        assert cds.type_url == CLUSTER
    return counted.reads


def test_a_change_is_compared_once_for_every_stream_holding_the_whole_cluster_snapshot() -> None:
    # What changed between the snapshot every wildcard stream holds and the new one is worked
    # out once, not once per stream (10,000 clusters and a thousand streams).
    assert reads_of_held_clusters_for_one_change(5) == reads_of_held_clusters_for_one_change(1)


def test_after_a_cds_nack_content_equal_to_what_the_client_kept_is_not_sent() -> None:
    stream = SotwStream()
    first = connect_envoy(stream, base_snapshot())
    changed = snapshot(
        clusters=[eds_cluster("a", timeout_s=5), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    cds, eds = stream.on_snapshot(changed)
    kept = first[CLUSTER].version_info
    assert stream.on_request(nack(cds, "bad cluster", kept_version=kept), changed) == []
    stream.on_request(ack(eds, ["a", "b"]), changed)
    # Back to what the client kept: it holds exactly that already.
    assert stream.on_snapshot(base_snapshot()) == []
    # Changed again: the whole set goes out, compared with what the client kept.
    again = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b", timeout_s=7)],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )
    cds, eds = stream.on_snapshot(again)
    assert names_in(cds) == ["a", "b"] and names_in(eds) == ["b"]


# Encoding.
