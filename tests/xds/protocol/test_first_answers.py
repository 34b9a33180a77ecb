"""A stream's first answer of a whole type (and, over delta, the ACK of it) costs the stream no
walk of the type's names: a burst of thousands of streams connecting at once (a replica died)
is answered from what the first of them made, at the pace of the writes."""

from __future__ import annotations

import pytest
from envoy.config.core.v3.base_pb2 import Node

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, Snapshot, TypeSnapshot
from dragoman.xds.protocol import delta_stream, sotw_stream
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.make_before_break import ClusterWarmth
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.stream_protocol import StreamMemos
from tests.support.xds_builders import (
    ack,
    delta_ack,
    delta_nack,
    delta_request,
    dns_cluster,
    eds_cluster,
    endpoints,
    request,
    snapshot,
    versions_in,
)


def served(count: int = 50) -> Snapshot:
    return snapshot(clusters=[eds_cluster(f"c{i:03}") for i in range(count)])


def first_answer(stream: DeltaStream, current: Snapshot, node: str = "e") -> object:
    (response,) = stream.on_request(delta_request(CLUSTER, node=Node(id=node)), current)
    return response


def test_first_answers_of_the_whole_type_share_one_body() -> None:
    current = served()
    memos = StreamMemos()
    one = first_answer(DeltaStream(CLUSTER, memos), current, "e1")
    other = first_answer(DeltaStream(CLUSTER, memos), current, "e2")
    assert one.to_bytes() is other.to_bytes()  # type: ignore[attr-defined]
    assert len(memos.bodies.lru) == 1
    clusters = current.of_type(CLUSTER)
    assert one.names == tuple(clusters.resources)  # type: ignore[attr-defined]
    assert versions_in(one) == {n: r.digest for n, r in clusters.resources.items()}  # type: ignore[arg-type]


def test_the_ack_of_a_first_answer_takes_the_shared_map_without_a_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    current = served()
    stream = DeltaStream(CLUSTER, StreamMemos())
    response = first_answer(stream, current)

    def walked(*args: object) -> bool:
        raise AssertionError("the ACK compared what it carried name by name")

    monkeypatch.setattr(DeltaStream, "_acks_what_is_held", walked)
    assert stream.on_request(delta_ack(response), current) == []  # type: ignore[arg-type]
    state = stream.types[CLUSTER]
    shared = stream.memos.digest_maps.digests_of(current.of_type(CLUSTER))
    assert state.acked.mapping is shared and state.held.mapping is shared
    assert not state.pending


def test_a_first_answer_acked_after_a_later_push_is_not_taken_as_the_latest() -> None:
    """Two responses in flight: the ACK of the first makes the client hold the first's
    snapshot, not the second's."""
    current = served()
    stream = DeltaStream(CLUSTER, StreamMemos())
    first = first_answer(stream, current)
    changed = served()
    changed = Snapshot(
        types={
            **changed.types,
            CLUSTER: changed.of_type(CLUSTER).replaced({"c001": eds_cluster("c001", timeout_s=9)}),
        }
    )
    (push,) = stream.on_snapshot(changed)
    stream.on_request(delta_ack(first), changed)  # type: ignore[arg-type]
    state = stream.types[CLUSTER]
    assert dict(state.acked.mapping) == {
        n: r.digest for n, r in current.of_type(CLUSTER).resources.items()
    }
    stream.on_request(delta_ack(push), changed)
    assert state.acked.mapping is stream.memos.digest_maps.digests_of(changed.of_type(CLUSTER))


def test_a_rejected_first_answer_leaves_nothing_acked_and_is_not_sent_again() -> None:
    current = served(3)
    stream = DeltaStream(CLUSTER, StreamMemos())
    response = first_answer(stream, current)
    assert stream.on_request(delta_nack(response, "bad"), current) == []  # type: ignore[arg-type]
    state = stream.types[CLUSTER]
    assert not state.acked and not state.held
    assert set(state.rejected) == set(current.of_type(CLUSTER).resources)


@pytest.mark.parametrize("with_dns", [False, True])
def test_every_cluster_sent_awaits_what_clusters_sent_awaits(with_dns: bool) -> None:
    resources = [eds_cluster("a", "sa"), eds_cluster("b")]
    if with_dns:
        resources.append(dns_cluster("d", "d.example.test"))
    clusters = TypeSnapshot.of(resources)
    whole, one_by_one = ClusterWarmth(), ClusterWarmth()
    for warmth in (whole, one_by_one):
        warmth.grace = lambda: None
    whole.every_cluster_sent("7", clusters)
    one_by_one.clusters_sent("7", clusters.ordered, {})
    assert whole.awaited == one_by_one.awaited == {"sa", "b"}
    assert whole.cluster_nonce == one_by_one.cluster_nonce == 7
    assert whole.resolving_nonce == one_by_one.resolving_nonce == (7 if with_dns else None)


def test_a_type_snapshot_orders_and_gathers_its_references_once() -> None:
    clusters = TypeSnapshot.of([eds_cluster("b"), eds_cluster("a", "sa")])
    assert [r.name for r in clusters.ordered] == ["a", "b"]
    assert clusters.ordered is clusters.ordered
    assert clusters.referenced == (frozenset({"sa", "b"}), False)
    assert clusters.referenced is clusters.referenced
    assert TypeSnapshot.of([dns_cluster("d", "d.example.test")]).referenced == (frozenset(), True)


class _Unread:
    """A resource whose name and digest must not be read."""

    @property
    def name(self) -> str:
        raise AssertionError("a name read for the key of a whole type's body")

    digest = name


def test_the_body_of_a_whole_type_is_found_by_its_version_alone() -> None:
    clusters = served().of_type(CLUSTER)
    bodies = StreamMemos().bodies
    made = bodies.delta_response(
        CLUSTER, clusters.version, clusters.ordered, (), 0, whole_type=True
    )
    again = bodies.delta_response(
        CLUSTER,
        clusters.version,
        [_Unread()] * len(clusters.ordered),
        (),
        0,
        whole_type=True,  # type: ignore[list-item]
    )
    assert again.to_bytes() is made.to_bytes() and again.names == tuple(clusters.resources)


def test_a_sotw_first_answer_of_every_cluster_compares_no_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    current = served()
    stream = SotwStream(memos=StreamMemos())

    def compared(*args: object) -> set[str]:
        raise AssertionError("a first answer compared every name with what the client held")

    monkeypatch.setattr(sotw_stream, "_changed", compared)
    (response,) = stream.on_request(request(CLUSTER, node=Node(id="e")), current)
    clusters = current.of_type(CLUSTER)
    assert response.resources is clusters.resources
    assert stream.warmth.awaited == clusters.referenced[0]
    assert stream.warmth.cluster_nonce == int(response.nonce)
    stream.on_request(ack(response), current)
    assert not stream.warmth.awaited  # answered: no CLA is awaited without an EDS stream


def test_every_cla_subscribed_by_name_is_one_body_found_by_its_version() -> None:
    """Envoy's EDS over delta names every CLA: that first answer is the whole type too."""
    current = snapshot(
        clusters=[eds_cluster(f"c{i}") for i in range(5)],
        assignments=[endpoints(f"c{i}", f"10.0.0.{i + 1}") for i in range(5)],
    )
    names = [f"c{i}" for i in range(5)]
    memos = StreamMemos()
    streams = [DeltaStream(ENDPOINT, memos) for _ in range(2)]
    answers = [s.on_request(delta_request(ENDPOINT, names), current)[0] for s in streams]
    assert answers[0].to_bytes() is answers[1].to_bytes()
    assert list(versions_in(answers[0])) == names
    assert streams[0].on_request(delta_ack(answers[0]), current) == []
    shared = memos.digest_maps.digests_of(current.of_type(ENDPOINT))
    assert streams[0].types[ENDPOINT].acked.mapping is shared


def test_a_reconnecting_client_is_sent_only_what_it_lacks_not_the_whole_type() -> None:
    current = served(4)
    clusters = current.of_type(CLUSTER)
    held = {n: r.digest for n, r in clusters.resources.items()}
    held["c001"] = "stale"
    stream = DeltaStream(CLUSTER, StreamMemos())
    (answer,) = stream.on_request(delta_request(CLUSTER, initial=held), current)
    assert versions_in(answer) == {"c001": clusters.resources["c001"].digest}
    assert stream.on_request(delta_ack(answer), current) == []
    state = stream.types[CLUSTER]
    # What it held is ACKed too (it accepted it on its last stream): both are the shared map.
    shared = stream.memos.digest_maps.digests_of(clusters)
    assert state.held.mapping is shared and state.acked.mapping is shared and not state.pending


def test_a_reconnecting_client_holding_a_recent_version_is_planned_from_its_shared_map(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A fleet whose replica went away holds what it was last served: each stream takes that
    # version's shared map and its shared diff, with no walk of every name.
    memos = StreamMemos()
    before = served(40)
    first_answer(DeltaStream(CLUSTER, memos), before)  # this replica served it too
    changed = snapshot(
        clusters=[eds_cluster(f"c{i:03}", timeout_s=1 + (i == 7)) for i in range(40)]
    )
    planned: list[object] = []
    by_shared_map = delta_stream._plan_from_shared_map

    def spied(*args: object) -> object:
        planned.append(by_shared_map(*args))  # type: ignore[arg-type]
        return planned[-1]

    monkeypatch.setattr(delta_stream, "_plan_from_shared_map", spied)
    held = {n: r.digest for n, r in before.of_type(CLUSTER).resources.items()}
    stream = DeltaStream(CLUSTER, memos)
    (answer,) = stream.on_request(delta_request(CLUSTER, initial=held), changed)
    assert list(versions_in(answer)) == ["c007"] and planned and planned[-1] is not None
    state = stream.types[CLUSTER]
    assert state.acked.mapping is memos.digest_maps.digests_of(before.of_type(CLUSTER))
    assert state.held.mapping is memos.digest_maps.digests_of(changed.of_type(CLUSTER))


def test_a_wildcard_with_names_beside_it_is_answered_whole_and_acked() -> None:
    current = served(3)
    stream = DeltaStream(CLUSTER, StreamMemos())
    (answer,) = stream.on_request(delta_request(CLUSTER, ["*", "c001", "missing"]), current)
    assert list(versions_in(answer)) == ["c000", "c001", "c002"]
    assert answer.removed == ("missing",)
    stream.on_request(delta_ack(answer), current)
    state = stream.types[CLUSTER]
    assert set(state.acked) == {"c000", "c001", "c002"} and not state.pending


def test_a_first_answer_of_an_empty_type_goes_out_and_is_acked() -> None:
    current = snapshot()
    stream = DeltaStream(CLUSTER, StreamMemos())
    (answer,) = stream.on_request(delta_request(CLUSTER), current)
    assert versions_in(answer) == {} and answer.removed == ()
    assert stream.on_request(delta_ack(answer), current) == []
    assert not stream.types[CLUSTER].pending and not stream.warmth.awaited
