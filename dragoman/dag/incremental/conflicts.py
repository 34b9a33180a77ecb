"""Which entries conflicts between routes change: HTTPRoutes and GRPCRoutes on a listener with
both kinds (see kind_conflicts.py), TCPRoutes, TLSRoutes and UDPRoutes on a listener with
several (l4_conflicts.py), and those that were. A route alone on its listeners keeps them:
the others decide alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from dragoman.dag.frontends.kind_conflicts import AttachedRoute, without_kind_conflicts
from dragoman.dag.frontends.l4_conflicts import without_l4_conflicts
from dragoman.dag.incremental.entries import L4_KINDS, EntryInputs, RouteEntry, with_parents
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.model import Problem
from dragoman.objects import ObjectKey

Decide = Callable[[Sequence[AttachedRoute]], tuple[list[AttachedRoute], list[Problem]]]


def conflict_changes(
    routes: RouteIndex, inputs: EntryInputs
) -> list[tuple[RouteEntry, RouteEntry]]:
    """(entry, replacement) for every route whose parents or lost listeners conflicts change."""
    http, l4 = routes.shared_listeners()
    conflicted = routes.conflicted
    l4_conflicted = {key for key in conflicted if key.kind in L4_KINDS}
    return [
        *_decided(routes, inputs, http, conflicted - l4_conflicted, without_kind_conflicts),
        *_decided(routes, inputs, l4, l4_conflicted, without_l4_conflicts),
    ]


def _decided(
    routes: RouteIndex,
    inputs: EntryInputs,
    shared: list[Iterable[ObjectKey]],
    conflicted: set[ObjectKey],
    decide: Decide,
) -> list[tuple[RouteEntry, RouteEntry]]:
    involved = sorted(set().union(*shared)) if shared else []
    entries = routes.entries
    kept, conflicts = (
        decide([AttachedRoute(entries[key].route, entries[key].attached) for key in involved])
        if involved
        else ([], [])
    )
    changed = []
    by_route: dict[ObjectKey, list[Problem]] = {}
    for problem in conflicts:
        by_route.setdefault(problem.object, []).append(problem)
    outcomes = {key: item.parents for key, item in zip(involved, kept, strict=True)}
    for key in sorted(conflicted | outcomes.keys()):
        entry = entries[key]
        parents = outcomes.get(key, entry.attached)
        lost = tuple(by_route.get(key, ()))
        if parents != entry.parents or lost != entry.conflicts:
            changed.append((entry, with_parents(entry, parents, lost, inputs)))
    return changed
