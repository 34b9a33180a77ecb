"""A change reaches the routes that read what changed: a Service its readers, a route itself,
a ReferenceGrant the routes whose questions it answers, an external name observed anew the
routes forwarding to it."""

from __future__ import annotations

from collections.abc import Iterable

from dragoman.dag.incremental.changes import StoreChanges
from dragoman.dag.incremental.reach import reached_routes
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.objects import ObjectKey
from dragoman.store import Store
from tests.dag.incremental.parts import GRPC, HTTP, OTHER, WEB, entries, store
from tests.support.builders import reference_grant


def _index() -> RouteIndex:
    index = RouteIndex()
    for entry in entries().values():
        index.add(entry)
    return index


def test_each_change_reaches_the_routes_that_read_it() -> None:
    index, before = _index(), store()
    after = before  # the stores matter to ReferenceGrants and BackendTLSPolicies only

    def reach(changes: StoreChanges, observed: Iterable[str] = ()) -> set[ObjectKey]:
        return reached_routes(index, before, after, changes, observed, with_names=True)

    assert reach({"services": frozenset({WEB})}) == {HTTP, OTHER}
    assert reach({"services": frozenset({("default", "api")})}) == {HTTP, GRPC}
    assert reach({"http_routes": frozenset({("default", "h")})}) == {HTTP}
    assert reach({}, ["api.example.net"]) == {HTTP, GRPC}
    assert reach({"services": frozenset({("default", "nobody-reads")})}) == set()


def test_a_grant_reaches_only_the_routes_whose_questions_it_answers() -> None:
    index, before = _index(), store()
    unrelated = reference_grant(
        "to-api", "default", from_kind="GRPCRoute", from_namespace="elsewhere", to_name="api"
    )
    after = store(unrelated)
    changed = {"reference_grants": frozenset({("default", "to-api")})}
    assert reached_routes(index, before, after, changed, (), with_names=True) == set()
    # The grant the HTTPRoute of namespace other asked about: it is reached.
    changed = {"reference_grants": frozenset({("default", "to-web")})}
    assert reached_routes(index, before, Store(), changed, (), with_names=True) == {OTHER}
