"""Requests merged while a stream is over its request rate: one answer per type per burst,
with the protocol's meaning kept (subscriptions, ACKs and NACKs)."""

from __future__ import annotations

import random

from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, Snapshot
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.request_mailbox import MAX_SETTLEMENTS, RequestMailbox
from dragoman.xds.protocol.stream_protocol import StreamMemos
from dragoman.xds.protocol.wire import DeltaResponse
from tests.support.xds_builders import delta_request, endpoints, request, snapshot


def test_a_sotw_burst_leaves_the_first_request_and_the_latest_one() -> None:
    box = RequestMailbox()
    first = request(CLUSTER, node=Node(id="envoy"))
    box.put(first)
    for i in range(1000):
        box.put(request(ENDPOINT, [f"a{i}"], nonce=str(i)))
    box.put(request(CLUSTER, version="v1", nonce="1"))
    taken = box.take()
    assert taken[0] is first  # the node, the legacy wildcard: never merged away
    assert [(r.type_url, list(r.resource_names)) for r in taken[1:]] == [
        (ENDPOINT, ["a0"]),  # the first EDS request, alone
        (ENDPOINT, ["a999"]),  # the latest stands for the 998 between
        (CLUSTER, []),
    ]
    assert box.merged_count == 998
    assert len(box) == 0 and box.take() == []


def test_a_sotw_nack_is_not_turned_into_an_ack_by_a_later_request_for_the_same_nonce() -> None:
    box = RequestMailbox()
    box.put(request(CLUSTER))
    box.put(request(CLUSTER, version="v1", nonce="2", error="bad cluster"))
    box.put(request(CLUSTER, ["x"], version="v1", nonce="2"))  # a subscription change after it
    (_, merged) = box.take()
    assert isinstance(merged, DiscoveryRequest)
    assert merged.error_detail.message == "bad cluster"
    assert list(merged.resource_names) == ["x"] and merged.response_nonce == "2"


def test_a_later_sotw_nonce_supersedes_an_earlier_nack() -> None:
    box = RequestMailbox()
    box.put(request(CLUSTER))
    box.put(request(CLUSTER, nonce="2", error="bad"))
    box.put(request(CLUSTER, version="v3", nonce="3"))
    (_, merged) = box.take()
    assert not merged.HasField("error_detail") and merged.response_nonce == "3"


def test_delta_subscriptions_merge_in_order_and_every_settlement_is_kept() -> None:
    box = RequestMailbox()
    box.put(delta_request(CLUSTER, ["*"], initial={"a": "1"}, node=Node(id="envoy")))
    box.put(delta_request(CLUSTER, ["a", "b"], nonce="1"))
    box.put(delta_request(CLUSTER, unsubscribe=["a", "c"], nonce="2", error="rejected"))
    box.put(delta_request(CLUSTER, ["c"], ["b"]))
    box.put(delta_request(CLUSTER, ["d"], nonce="1"))  # the same ACK again
    first, *rest = box.take()
    assert isinstance(first, DeltaDiscoveryRequest) and dict(first.initial_resource_versions)
    settlements, change = rest[:-1], rest[-1]
    assert [(s.response_nonce, s.error_detail.message) for s in settlements] == [
        ("2", "rejected"),
        ("1", ""),
    ]
    assert all(not s.resource_names_subscribe for s in settlements)
    assert not change.response_nonce
    assert set(change.resource_names_subscribe) == {"c", "d"}
    assert set(change.resource_names_unsubscribe) == {"a", "b"}


def test_delta_settlements_kept_are_bounded() -> None:
    box = RequestMailbox()
    box.put(delta_request(CLUSTER, ["*"]))
    for i in range(10_000):
        box.put(delta_request(CLUSTER, nonce=str(i)))
    taken = box.take()
    assert len(taken) == 1 + MAX_SETTLEMENTS
    assert taken[-1].response_nonce == "9999"


def test_the_same_first_request_again_and_again_leaves_the_first_and_one_more() -> None:
    box = RequestMailbox()
    first = request(CLUSTER, node=Node(id="envoy"))
    for _ in range(3):
        box.put(request(CLUSTER, node=Node(id="envoy")))
    box.put(request(CLUSTER, ["x"]))
    taken = box.take()
    assert len(taken) == 2
    assert taken[0] == first and list(taken[1].resource_names) == ["x"]


# Merged or not, a delta stream ends in the same state, and its client holds the same.

NAMES = ["n0", "n1", "n2", "n3", "absent"]


def eds_snapshot() -> Snapshot:
    return snapshot(assignments=[endpoints(n, "10.0.0.1") for n in NAMES[:-1]])


def random_changes(rng: random.Random, count: int) -> list[DeltaDiscoveryRequest]:
    requests = []
    for _ in range(count):
        picked = rng.sample(NAMES, rng.randint(1, 3))
        cut = rng.randint(0, len(picked))
        requests.append(delta_request(ENDPOINT, picked[:cut], picked[cut:]))
    return requests


def served(requests: list[DeltaDiscoveryRequest], merge: bool) -> tuple[object, ...]:
    snap = eds_snapshot()
    stream = DeltaStream(memos=StreamMemos())
    held: dict[str, str] = {}

    def receive(responses: list[DeltaResponse]) -> None:
        for response in responses:
            message = response.message()
            for name in message.removed_resources:
                held.pop(name, None)
            for resource in message.resources:
                held[resource.name] = resource.version

    box = RequestMailbox()
    box.put(requests[0])
    receive(stream.on_request(box.take()[0], snap))
    for sent in requests[1:]:
        for name in sent.resource_names_unsubscribe:
            held.pop(name, None)  # a client drops what it unsubscribes from
        if merge:
            box.put(sent)
        else:
            receive(stream.on_request(sent, snap))
    for merged in box.take():
        assert isinstance(merged, DeltaDiscoveryRequest)
        receive(stream.on_request(merged, snap))
    state = stream.types[ENDPOINT]
    return frozenset(state.names), state.wildcard, held


def test_merged_delta_requests_end_where_the_requests_one_by_one_do() -> None:
    rng = random.Random(25)
    for _ in range(300):
        requests = [
            delta_request(ENDPOINT, rng.sample(NAMES, 2), node=Node(id="envoy")),
            *random_changes(rng, rng.randint(1, 8)),
        ]
        assert served(requests, merge=True) == served(requests, merge=False), requests
