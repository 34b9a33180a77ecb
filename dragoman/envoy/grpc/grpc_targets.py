"""What a node group's proxyless gRPC clients can dial, as API listeners: the Service targets
the build made (every call to the port's cluster), and every exact route hostname on each
HTTP or HTTPS port of the group (its routes those of the virtual host the port serves for it,
precedence and listener isolation included)."""

from __future__ import annotations

from collections.abc import Iterable

from dragoman.dag.model import (
    ANY_HOST,
    MISDIRECTED,
    AggregateCluster,
    ApiListener,
    Backend,
    DnsCluster,
    Forward,
    HttpListener,
    HttpsListener,
    Listener,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    ServiceTarget,
    VirtualHost,
)
from dragoman.objects import ObjectKey

# Every call to a Service target goes to its port's cluster.
_EVERY_PATH = RouteMatch("PathPrefix", "/")


def service_listener(target: ServiceTarget) -> ApiListener:
    """The API listener of a Service target: one route, every call to the port's cluster."""
    cluster = target.cluster
    forward = Forward(
        backends=(Backend(cluster=cluster.name, weight=1),),
        # For clients that may rewrite the authority (gRFC A81): the external name.
        auto_host_rewrite=isinstance(cluster, DnsCluster | AggregateCluster),
    )
    route = Route(_EVERY_PATH, forward, source=ObjectKey("Service", *target.service))
    return ApiListener(name=target.name, host=target.host, routes=(route,))


def route_targets(group: NodeGroup) -> tuple[ApiListener, ...]:
    """A target per exact hostname a port of the group serves routes for.

    Wildcard hostnames have none: a gRPC client dials one name. On an HTTPS port the virtual
    host of the hostname's own TLS chain is taken (the others answer 421 for it).
    """
    tables = {table.name: table for table in group.route_tables}
    found: dict[str, ApiListener] = {}
    for listener in sorted(group.listeners, key=lambda listener: listener.port):
        port = listener.port
        for table in (tables[n] for n in _route_table_names(listener) if n in tables):
            for host in _served_hosts(table):
                name = f"{host.name}:{port}"
                found.setdefault(name, ApiListener(name=name, host=host.name, routes=host.routes))
    return tuple(found[name] for name in sorted(found))


def group_targets(group: NodeGroup, services: Iterable[ApiListener]) -> tuple[ApiListener, ...]:
    """Everything the group's gRPC clients can dial (`services`: the Service targets'
    listeners); a route hostname wins over a Service name spelled the same (a route says
    more about where calls go)."""
    by_name = {listener.name: listener for listener in services}
    by_name.update((listener.name, listener) for listener in route_targets(group))
    return tuple(by_name[name] for name in sorted(by_name))


def _route_table_names(listener: Listener) -> tuple[str, ...]:
    """The route tables of an HTTP or HTTPS port; none for TCP, TLS and UDP ports, whose
    connections a gRPC client cannot dial by name (it sees none of them)."""
    if isinstance(listener, HttpsListener):
        return tuple(chain.route_table for chain in listener.filter_chains)
    if isinstance(listener, HttpListener):
        return (listener.route_table,)
    return ()


def _served_hosts(table: RouteTable) -> Iterable[VirtualHost]:
    for host in table.virtual_hosts:
        if host.name == ANY_HOST or host.name.startswith("*.") or not host.routes:
            continue
        if all(route.action == MISDIRECTED for route in host.routes):
            continue
        yield host
