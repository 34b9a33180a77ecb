"""A scoped route table's ScopedRouteConfigurations: one per virtual host, each holding that
host's route table inline, keyed on its hostname.

Each scope is its own resource, so a change re-sends (and Envoy rebuilds) only the hosts it
touched. A change costs about the hosts it touched too: the table's hosts are compared with
the last translation's by identity (an unchanged host is the same object, in the same order),
only a host that came or changed is made again (or kept when equal, after a full build), and
the node group's snapshot of scopes puts only those in place (`SortedListing`).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from envoy.config.route.v3.scoped_route_pb2 import ScopedRouteConfiguration

from dragoman.dag.model import RouteTable, VirtualHost
from dragoman.envoy.resources.route_messages import route_configuration
from dragoman.snapshots.resources import Resource
from dragoman.snapshots.sorted_listing import SortedListing

# A scope's value (what it was made of) and its Resource, by scope name.
KnownScopes = Mapping[str, tuple[VirtualHost, Resource]]
# Scopes that differ from an earlier state's: a Resource, or None when gone.
ScopeChanges = Mapping[str, Resource | None]

_serials = itertools.count(1)


def scope_name(table: str, host: str) -> str:
    """The scope of `host` in the route table named `table` (and the name of its inline
    RouteConfiguration)."""
    return f"{table}/{host}"


def route_scope(table: str, host: VirtualHost) -> ScopedRouteConfiguration:
    """The scope of one virtual host: its table holds the host as the whole route table
    would, with the same table-level fields."""
    name = scope_name(table, host.name)
    key = ScopedRouteConfiguration.Key(
        fragments=[ScopedRouteConfiguration.Key.Fragment(string_key=host.name)]
    )
    return ScopedRouteConfiguration(
        name=name, route_configuration=route_configuration(RouteTable(name, (host,))), key=key
    )


@dataclass(frozen=True, slots=True)
class ScopedTable:
    """One scoped route table's scopes, and what they were made of."""

    value: RouteTable
    scopes: KnownScopes
    serial: int = field(default_factory=lambda: next(_serials))
    # The serial of the state this one was made from (0: none), and the scopes that differ
    # from that one's.
    base: int = 0
    changes: ScopeChanges = field(default_factory=dict)


def scoped_table(
    value: RouteTable, known: ScopedTable | None, made: dict[str, tuple[VirtualHost, Resource]]
) -> ScopedTable:
    """`value`'s scopes, those of `known` (the same table's last state) whose host is
    unchanged kept; a scope made in this translation (`made`, by name) shared. Only the
    hosts between the first and the last one that is not `known`'s cost a step each."""
    if known is None:
        scopes = {}
        for host in value.virtual_hosts:
            name = scope_name(value.name, host.name)
            scopes[name] = _scope(value.name, host, None, made)
        return ScopedTable(value, scopes)
    old, new = known.value.virtual_hosts, value.virtual_hosts
    if old is new:
        return known  # a scope is made of its table's name and its host alone
    # The hosts are in name order and an unchanged one is the same object: what changed
    # lies between the longest common head and tail (found by identity, a C loop each).
    shortest = min(len(old), len(new))
    head = _same_run(old, new, shortest)
    tail = _same_run(reversed(old), reversed(new), shortest - head)
    was = {host.name: host for host in old[head : len(old) - tail]}
    scopes = dict(known.scopes)
    changes: dict[str, Resource | None] = {}
    for host in new[head : len(new) - tail]:
        before = was.pop(host.name, None)
        if before is host:
            continue
        name = scope_name(value.name, host.name)
        found = known.scopes.get(name) if before is not None else None
        scopes[name] = made_now = _scope(value.name, host, found, made)
        if found is None or made_now[1] is not found[1]:  # else an equal host (a full build)
            changes[name] = made_now[1]
    for host in was.values():  # gone
        name = scope_name(value.name, host.name)
        del scopes[name]
        changes[name] = None
    return ScopedTable(value, scopes, base=known.serial, changes=changes)


def _same_run(old: Iterable[VirtualHost], new: Iterable[VirtualHost], limit: int) -> int:
    """How many hosts `old` and `new` start with that are the same objects (at most `limit`)."""
    differing = itertools.compress(itertools.count(), map(operator.is_not, old, new))
    return min(next(differing, limit), limit)


def _scope(
    table: str,
    host: VirtualHost,
    before: tuple[VirtualHost, Resource] | None,
    made: dict[str, tuple[VirtualHost, Resource]],
) -> tuple[VirtualHost, Resource]:
    """The scope of `host`: `before`'s Resource when its host is equal (its own, so that an
    unchanged scope never differs by identity), else one made in this translation for an
    equal host, else made now."""
    name = scope_name(table, host.name)
    if before is not None and before[0] == host:
        found = host, before[1]
        made.setdefault(name, found)
        return found
    shared = made.get(name)
    if shared is not None and (shared[0] is host or shared[0] == host):
        return shared
    found = made[name] = host, Resource.of(name, route_scope(table, host))
    return found


@dataclass(frozen=True, slots=True)
class GroupScopes:
    """A node group's scopes: its scoped tables (by name) and their snapshot."""

    tables: Mapping[str, ScopedTable]
    listing: SortedListing


def group_scopes(tables: Sequence[ScopedTable], known: GroupScopes | None) -> GroupScopes:
    """The scopes of `tables`, as `known` (the group's last ones) with only what differs
    from them put in place."""
    now = {table.value.name: table for table in tables}
    if known is None:
        scopes = (resource for table in tables for _, resource in table.scopes.values())
        return GroupScopes(now, SortedListing.of(scopes))
    changes: dict[str, Resource | None] = {}
    for name, gone in known.tables.items():
        if name not in now:
            changes.update(dict.fromkeys(gone.scopes))
    for name, table in now.items():
        before = known.tables.get(name)
        if before is table:
            continue
        if before is not None and table.base == before.serial:
            changes.update(table.changes)
        else:
            changes.update(_difference(before.scopes if before is not None else {}, table.scopes))
    return GroupScopes(now, known.listing.changed(changes))


def _difference(before: KnownScopes, now: KnownScopes) -> ScopeChanges:
    """The scopes of `now` that differ from `before`'s, and those of `before` gone."""
    changes: dict[str, Resource | None] = dict.fromkeys(before.keys() - now.keys())
    for name, (_, resource) in now.items():
        found = before.get(name)
        if found is None or found[1] is not resource:
            changes[name] = resource
    return changes
