"""Attached routes to what one group of Envoys receives: listeners, route tables, clusters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dragoman.dag.attach import Attachment
from dragoman.dag.listeners import listener_name, served_ports
from dragoman.dag.model import (
    Forward,
    HttpListener,
    NodeGroup,
    Route,
    RouteTable,
    VirtualHost,
)
from dragoman.dag.routes import Precedence, RankedRoute
from dragoman.objects import Gateway


@dataclass(frozen=True, slots=True)
class ServedRoutes:
    """The routes of one HTTPRoute, served where one listener accepted it."""

    attachment: Attachment
    routes: tuple[RankedRoute, ...]


def node_group(name: str, gateways: Sequence[Gateway], served: Iterable[ServedRoutes]) -> NodeGroup:
    """Every served port of `gateways` becomes one listener, whatever Gateway it came from."""
    ports = sorted({port for gateway in gateways for port in served_ports(gateway)})
    # port -> domain -> routes; Envoy rejects a domain twice in one route table, so merge.
    tables: dict[int, dict[str, dict[Precedence, Route]]] = {port: {} for port in ports}
    for item in served:
        virtual_hosts = tables[item.attachment.port]
        for domain in item.attachment.domains:
            # Keyed by precedence, so a route reaching a domain through two listeners is one.
            routes = virtual_hosts.setdefault(domain, {})
            routes.update((ranked.precedence, ranked.route) for ranked in item.routes)

    route_tables = tuple(
        RouteTable(
            name=listener_name(port),
            virtual_hosts=tuple(
                VirtualHost(
                    name=domain,
                    domains=(domain,),
                    routes=tuple(routes[precedence] for precedence in sorted(routes)),
                )
                for domain, routes in sorted(tables[port].items())
            ),
        )
        for port in ports
    )
    listeners = tuple(
        HttpListener(name=listener_name(port), port=port, route_table=listener_name(port))
        for port in ports
    )
    return NodeGroup(
        name=name,
        listeners=listeners,
        route_tables=route_tables,
        clusters=_referenced_clusters(route_tables),
    )


def _referenced_clusters(route_tables: Iterable[RouteTable]) -> tuple[str, ...]:
    return tuple(
        sorted(
            {
                backend.cluster
                for table in route_tables
                for virtual_host in table.virtual_hosts
                for route in virtual_host.routes
                if isinstance(route.action, Forward)
                for backend in route.action.backends
                if backend.cluster is not None
            }
        )
    )
