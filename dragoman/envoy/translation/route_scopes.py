"""A scoped route table's ScopedRouteConfigurations: one per virtual host, each holding that
host's route table inline, keyed on its hostname.

Each scope is its own resource, so a change re-sends (and Envoy rebuilds) only the hosts it
touched; a host whose VirtualHost value is unchanged keeps its bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.route.v3.scoped_route_pb2 import ScopedRouteConfiguration

from dragoman.dag.model import RouteTable, VirtualHost
from dragoman.envoy.resources.route_messages import route_configuration
from dragoman.snapshots.resources import Resource

# A scope's value (what it was made of) and its Resource, by scope name.
KnownScopes = Mapping[str, tuple[VirtualHost, Resource]]


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


def scope_resources(
    table: RouteTable, known: KnownScopes, made: dict[str, tuple[VirtualHost, Resource]]
) -> list[Resource]:
    """The table's scopes, each `known` one whose host is unchanged reused (by identity, or
    equality after a full build); what was made or reused is put in `made`."""
    resources = []
    for host in table.virtual_hosts:
        name = scope_name(table.name, host.name)
        found = made.get(name) or known.get(name)
        if found is None or not (found[0] is host or found[0] == host):
            found = host, Resource.of(name, route_scope(table.name, host))
        made[name] = found
        resources.append(found[1])
    return resources
