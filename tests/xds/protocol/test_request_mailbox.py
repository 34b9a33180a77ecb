"""Requests merged while a stream is over its request rate: one answer per type per burst,
with the protocol's meaning kept (subscriptions, ACKs and NACKs)."""

from __future__ import annotations

from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.snapshots.resources import CLUSTER, ENDPOINT
from dragoman.xds.protocol.request_mailbox import MAX_SETTLEMENTS, RequestMailbox
from tests.support.xds_builders import delta_request, request


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
