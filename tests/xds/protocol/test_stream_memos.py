"""Memo caches belong to the object that uses them: two caches in one process (two servers,
or a test beside a server) never evict or drop each other's entries."""

from __future__ import annotations

import random
from typing import Any

from envoy.config.core.v3.base_pb2 import Node

from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import (
    ALL_GATEWAYS,
    CLUSTER,
    LISTENER,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.digest_maps import DIFFS, RECENT_MAPS, DigestMaps
from dragoman.xds.protocol.sotw_state import WholeTypeDiffs
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.xds_builders import (
    delta_ack,
    delta_request,
    eds_cluster,
    listener,
    request,
    snapshot,
)


def clusters(version: int) -> Snapshot:
    return snapshot(clusters=[eds_cluster("a", timeout_s=version), eds_cluster("b")])


def test_each_cache_has_memos_of_its_own() -> None:
    one, other = SnapshotCache(), SnapshotCache()
    assert one.memos is not other.memos
    assert one.memos.bodies is not other.memos.bodies
    assert one.memos.digest_maps is not other.memos.digest_maps


def test_a_cache_letting_go_of_a_version_keeps_the_body_another_cache_still_serves() -> None:
    served = clusters(1)
    one, other = SnapshotCache(), SnapshotCache()
    one.set_snapshots({ALL_GATEWAYS: served})
    other.set_snapshots({ALL_GATEWAYS: served})
    first = SotwStream(memos=one.memos).on_request(request(CLUSTER, node=Node(id="e1")), served)
    SotwStream(memos=other.memos).on_request(request(CLUSTER, node=Node(id="e2")), served)
    # The other cache moves on: the version both served is no longer its to keep.
    for version in range(2, 6):
        other.set_snapshots({ALL_GATEWAYS: clusters(version)})
    assert other.memos.bodies.forget_versions({served.of_type(CLUSTER).version}) == 0
    again = SotwStream(memos=one.memos).on_request(request(CLUSTER, node=Node(id="e3")), served)
    assert again[0].to_bytes() is first[0].to_bytes()  # still shared, not encoded again


def test_digest_maps_of_one_cache_survive_churn_in_another() -> None:
    served = clusters(1)
    one, other = DigestMaps(), DigestMaps()
    shared = one.digests_of(served.of_type(CLUSTER))
    for version in range(2, RECENT_MAPS + DIFFS + 10):
        other.digests_of(clusters(version).of_type(CLUSTER))
    assert one.shared_map_version(shared) == served.of_type(CLUSTER).version
    assert one.digests_of(served.of_type(CLUSTER)) is shared
    assert other.shared_map_version(shared) is None


def test_idle_delta_streams_of_one_cache_share_maps_another_cache_churns_past() -> None:
    served = clusters(1)
    one, other = SnapshotCache(), SnapshotCache()
    streams = [DeltaStream(CLUSTER, one.memos) for _ in range(2)]
    for stream in streams:
        (response,) = stream.on_request(delta_request(CLUSTER, node=Node(id="e")), served)
        stream.on_request(delta_ack(response), served)
    busy = DeltaStream(CLUSTER, other.memos)
    (response,) = busy.on_request(delta_request(CLUSTER, node=Node(id="b")), clusters(2))
    busy.on_request(delta_ack(response), clusters(2))
    for version in range(3, RECENT_MAPS + DIFFS + 10):
        current = clusters(version)
        for pushed in busy.on_snapshot(current):
            busy.on_request(delta_ack(pushed), current)
    held = [stream.types[CLUSTER].held.mapping for stream in streams]
    assert held[0] is held[1]
    assert one.memos.digest_maps.shared_map_version(held[0]) == served.of_type(CLUSTER).version
    # The push after the churn elsewhere still takes the shared diff: one body for both.
    changed = clusters(1000)
    pushes = [stream.on_snapshot(changed) for stream in streams]
    assert [p.names for (p,) in pushes] == [("a",), ("a",)]
    assert pushes[0][0].to_bytes() is pushes[1][0].to_bytes()


def test_per_type_rewrites_of_one_server_survive_churn_in_another() -> None:
    served = snapshot(clusters=[eds_cluster("a")], listeners=[listener("http", "routes-http")])
    one, other = PerTypeConfigSources(), PerTypeConfigSources()
    rewritten = one.per_type(served, delta=False)
    for version in range(2, 30):
        other.per_type(clusters(version), delta=False)
    again = one.per_type(served, delta=False)
    assert again.of_type(CLUSTER) is rewritten.of_type(CLUSTER)
    assert again.of_type(LISTENER) is rewritten.of_type(LISTENER)
    assert len(one) == 2 and len(other) <= 8


class _CountedLookups(dict[str, Resource]):
    """A held mapping that counts the names looked up in it."""

    looked_up = 0

    def get(self, name: str, default: object = None) -> Any:  # type: ignore[override]
        self.looked_up += 1
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self.looked_up += 1
        return super().__contains__(name)


def _resource(name: str, timeout_s: int) -> Resource:
    return eds_cluster(name, timeout_s=timeout_s)


def test_whole_type_diffs_of_a_derived_snapshot_walk_only_its_changed_names() -> None:
    """One change among many: the diff from the snapshot it was made from comes from the
    names `derived` lists, and equals the diff of every resource, through random edits,
    additions and removals (each of them, or together)."""
    rng = random.Random(5)
    for round_ in range(60):
        held_snapshot = TypeSnapshot.of(_resource(f"c{i:03d}", 1) for i in range(0, 200, 2))
        names = list(held_snapshot.resources)
        changed = {
            n: _resource(n, rng.randrange(2, 9)) for n in rng.sample(names, rng.randrange(4))
        }
        added = {
            n: _resource(n, 1)
            for n in (f"c{i:03d}" for i in rng.sample(range(1, 200, 2), rng.randrange(3)))
        }
        removed = rng.sample([n for n in names if n not in changed], rng.randrange(3))
        if round_ % 3 == 0:
            added, removed = {}, []
            current = held_snapshot.replaced(changed)  # the same names
        else:
            current = held_snapshot.patched({**changed, **added}, removed)
        held = _CountedLookups(held_snapshot.resources)
        diff = WholeTypeDiffs().between(held, held_snapshot.version, current)
        plain = TypeSnapshot(resources=current.resources, version=current.version)  # no derived
        assert diff == WholeTypeDiffs().between(
            held_snapshot.resources, held_snapshot.version, plain
        )
        if current is not held_snapshot:
            assert held.looked_up <= 2 * (len(changed) + len(added) + len(removed))
        assert diff[0] == frozenset(changed) | frozenset(added)
        assert diff[1] == tuple(sorted(removed))


def test_whole_type_diffs_from_another_snapshot_than_the_derived_one_walk_every_name() -> None:
    first = TypeSnapshot.of(_resource(f"c{i}", 1) for i in range(10))
    second = first.replaced({"c1": _resource("c1", 2)})
    third = second.replaced({"c2": _resource("c2", 3)})  # derived from the second
    changed, removed = WholeTypeDiffs().between(first.resources, first.version, third)
    assert (changed, removed) == (frozenset({"c1", "c2"}), ())
