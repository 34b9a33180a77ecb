"""Conflicts between routes are decided among the routes sharing a listener: an entry whose
parents (after conflicts) are no longer what the routes decide is replaced, with the
problems that follow; entries already decided alike are left alone."""

from __future__ import annotations

from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.incremental.conflicts import conflict_changes
from dragoman.dag.incremental.entries import with_parents
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.options import BuildOptions
from tests.dag.incremental.parts import GRPC, HTTP, store


def test_an_entry_that_lost_its_listener_is_replaced_and_then_left_alone() -> None:
    builder = IncrementalBuild(BuildOptions())
    builder.build(store())
    made = builder._build
    assert made is not None
    inputs = made._inputs()
    decided = made.routes.entries
    assert conflict_changes(made.routes, inputs) == []  # the build decided them already
    # The HTTPRoute as attach() found it, before the GRPCRoute took the listener.
    index = RouteIndex()
    undecided = with_parents(decided[HTTP], decided[HTTP].attached, (), inputs)
    index.add(undecided)
    index.add(decided[GRPC])
    [(old, new)] = conflict_changes(index, inputs)
    assert old is undecided
    assert new == decided[HTTP]
    assert [p.problem.reason for p in new.parents if p.problem] == ["RouteKindConflict"]
