"""The route index finds the routes a change reaches (by the Service read, the namespace of
the ReferenceGrants asked, the external name forwarded to), keeps each kind's routes in key
order, counts the routes each listener accepted, and forgets a route entirely when it is
removed."""

from __future__ import annotations

from dragoman.dag.incremental.entries import RouteEntry
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.objects import ObjectKey
from tests.dag.incremental.parts import GRPC, HTTP, OTHER, WEB, entries, many_entries

GATEWAY = ObjectKey("Gateway", "default", "gw")


def test_routes_are_found_by_what_they_read() -> None:
    index = RouteIndex()
    for entry in entries().values():
        index.add(entry)
    assert set(index.readers(WEB)) == {HTTP, OTHER}
    assert set(index.readers(("default", "api"))) == {HTTP, GRPC}
    assert list(index.readers(("default", "nothing"))) == []
    assert list(index.readers_of_all) == []
    assert list(index.grant_readers("default")) == [OTHER]  # asked across namespaces
    assert set(index.hostname_readers("api.example.net")) == {HTTP, GRPC}
    assert index.with_hostnames == {GRPC}  # of those, attached somewhere


def test_a_removed_route_is_found_nowhere() -> None:
    made = entries()
    index = RouteIndex()
    for entry in made.values():
        index.add(entry)
    for key in (HTTP, OTHER):
        index.remove(made[key])
    assert list(index.readers(WEB)) == []
    assert list(index.readers(("default", "api"))) == [GRPC]
    assert list(index.grant_readers("default")) == []
    assert list(index.hostname_readers("api.example.net")) == [GRPC]
    assert index.keys("HTTPRoute") == [] and index.keys("GRPCRoute") == [GRPC]
    assert set(index.entries) == {GRPC}
    index.remove(made[GRPC])
    assert list(index.hostname_readers("api.example.net")) == []
    assert index.with_hostnames == set()


def indexed_both_ways(made: dict[ObjectKey, RouteEntry]) -> tuple[RouteIndex, RouteIndex]:
    """Indexes of `made`, added in reverse key order: one route at a time, and in bulk."""
    one_by_one, bulk = RouteIndex(), RouteIndex()
    bulk.begin_bulk()
    for key in sorted(made, reverse=True):
        one_by_one.add(made[key])
        bulk.add(made[key])
    bulk.end_bulk()
    return one_by_one, bulk


def test_each_kind_keeps_its_routes_in_key_order_one_by_one_or_in_bulk() -> None:
    for index in indexed_both_ways(entries()):
        assert index.keys("HTTPRoute") == [HTTP, OTHER]
        assert index.keys("GRPCRoute") == [GRPC]
        assert list(index.kinds())[:2] == ["HTTPRoute", "GRPCRoute"]


def test_listeners_shared_by_http_and_grpc_routes_are_where_conflicts_are_decided() -> None:
    made = entries()
    index = RouteIndex()
    index.add(made[HTTP])
    assert index.shared_listeners() == ([], [])  # one kind on the listener: nothing to decide
    index.add(made[GRPC])
    http, l4 = index.shared_listeners()
    assert [sorted(keys) for keys in http] == [sorted([HTTP, GRPC])] and l4 == []


def test_accepted_routes_are_counted_per_listener() -> None:
    made = entries()  # the HTTPRoute lost the listener to the GRPCRoute (kind conflict)
    index = RouteIndex()
    for entry in made.values():
        index.add(entry)
    assert index.accepted == {GATEWAY: {"http": 1}}
    assert index.conflicted == {HTTP}  # its parents are not those it attached to
    index.remove(made[GRPC])
    assert index.accepted == {GATEWAY: {}}


def test_unindexed_what_routes_read_is_not_kept() -> None:
    index = RouteIndex(indexed=False)
    for entry in entries().values():
        index.add(entry)
    assert list(index.readers(WEB)) == []
    assert list(index.grant_readers("default")) == []
    assert list(index.hostname_readers("api.example.net")) == []
    assert index.keys("HTTPRoute") == [HTTP, OTHER]  # what the build itself reads is kept


def test_the_routes_problems_are_kept_in_key_order_one_by_one_or_in_bulk() -> None:
    made = many_entries()
    in_order = [p for key in sorted(made) for p in made[key].problems]
    assert len(in_order) == 4 and {p.reason for p in in_order} == {"BackendNotFound"}
    one_by_one, bulk = indexed_both_ways(made)
    assert list(one_by_one.problems()) == list(bulk.problems()) == in_order
    for key in (ObjectKey("HTTPRoute", "default", "r03"), ObjectKey("HTTPRoute", "default", "r04")):
        one_by_one.remove(made[key])
        bulk.remove(made[key])
    left = [p for key in sorted(made) if key.name not in ("r03", "r04") for p in made[key].problems]
    assert list(one_by_one.problems()) == list(bulk.problems()) == left
