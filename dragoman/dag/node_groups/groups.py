"""Attached routes to what one group of Envoys receives: listeners, route tables, clusters.

Every port of the group's Gateways becomes one Envoy listener. A plain-HTTP port has one route
table; an HTTPS port has one TLS filter chain per listener hostname (SNI), each with its own
route table. Virtual hosts follow Gateway API hostname rules (virtual_hosts.py), listener isolation
included: a request is answered only by routes of the most specific listener matching it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from dragoman.dag.frontends.attachment import Attachment
from dragoman.dag.frontends.hostnames import ANY_HOST, owner, specificity
from dragoman.dag.frontends.listeners import (
    L4_PROTOCOLS,
    GatewayVerdict,
    ListenerVerdict,
    listener_name,
    port_key,
)
from dragoman.dag.model import (
    MISDIRECTED,
    Forward,
    HttpListener,
    HttpsListener,
    InjectedCredential,
    Listener,
    NodeGroup,
    Problem,
    Route,
    RouteMatch,
    RouteTable,
    TcpListener,
    TlsFilterChain,
    UdpListener,
    VirtualHost,
)
from dragoman.dag.node_groups.l4_listeners import ServedL4Route, l4_listener
from dragoman.dag.node_groups.route_scopes import http_port_scoping, https_port_scoping
from dragoman.dag.node_groups.virtual_hosts import ListenerRoutes, Scheme, virtual_hosts
from dragoman.dag.routes.ranking import RankedRoute
from dragoman.objects import ObjectKey

# The Problem reason of a listener left out of the all-gateways group (see shadowed_listeners).
SHADOWED_LISTENER = "ShadowedListener"


@dataclass(frozen=True, slots=True)
class ServedRoutes:
    """The routes of one route object, served where one listener accepted it."""

    attachment: Attachment
    routes: tuple[RankedRoute, ...]
    route_hostnames: tuple[str, ...] = ()  # the route's own spec.hostnames


_ByListener = dict[tuple[str, str, str], list[ServedRoutes]]


# The virtual hosts of one port's listeners, given the port and its listeners (HTTP ports),
# or the port, its listeners and the one HTTPS listener whose route table is wanted; and the
# Envoy listener of a TCP, TLS or UDP port (None: nothing to serve there).
HttpHosts = Callable[[int, Sequence[ListenerVerdict]], tuple[VirtualHost, ...]]
HttpsHosts = Callable[[int, Sequence[ListenerVerdict], ListenerVerdict], tuple[VirtualHost, ...]]
L4Listener = Callable[[int, Sequence[ListenerVerdict]], Listener | None]


def node_group(
    name: str,
    gateways: Sequence[GatewayVerdict],
    served: Iterable[ServedRoutes],
    served_l4: Iterable[ServedL4Route] = (),
) -> NodeGroup:
    """The group's listeners, route tables and referenced clusters."""
    by_listener: _ByListener = {}
    for item in served:
        a = item.attachment
        by_listener.setdefault((a.gateway.namespace, a.gateway.name, a.listener), []).append(item)
    l4_by_listener: dict[tuple[str, str, str], list[ServedL4Route]] = {}
    for l4_item in served_l4:
        a = l4_item.attachment
        key = (a.gateway.namespace, a.gateway.name, a.listener)
        l4_by_listener.setdefault(key, []).append(l4_item)

    def http_hosts(port: int, verdicts: Sequence[ListenerVerdict]) -> tuple[VirtualHost, ...]:
        hostnames = [v.listener.hostname for v in verdicts]
        return virtual_hosts(port, hostnames, _listener_routes(verdicts, by_listener, "http"))

    def https_hosts(
        port: int, verdicts: Sequence[ListenerVerdict], verdict: ListenerVerdict
    ) -> tuple[VirtualHost, ...]:
        hostnames = [v.listener.hostname for v in verdicts]
        return virtual_hosts(port, hostnames, _listener_routes([verdict], by_listener, "https"))

    def l4(port: int, verdicts: Sequence[ListenerVerdict]) -> Listener | None:
        return l4_listener(port, list(verdicts), l4_by_listener)

    group = assembled_group(name, listeners_by_port(gateways), http_hosts, https_hosts, l4)
    return dataclasses.replace(
        group, clusters=_referenced_clusters(group.route_tables, group.listeners)
    )


def assembled_group(
    name: str,
    ports: Mapping[tuple[int, str], Sequence[ListenerVerdict]],
    http_hosts: HttpHosts,
    https_hosts: HttpsHosts,
    l4: L4Listener,
    clusters: tuple[str, ...] = (),
) -> NodeGroup:
    """The group of the listeners `ports` holds (see listeners_by_port), their virtual hosts
    made by `http_hosts` and `https_hosts`, their TCP, TLS and UDP listeners by `l4`."""
    listeners: list[Listener] = []
    route_tables: list[RouteTable] = []
    unscoped: list[Problem] = []
    scoped_port: int | None = None
    for key in sorted(ports):
        port, verdicts = key[0], ports[key]
        if verdicts[0].listener.protocol in L4_PROTOCOLS:
            made = l4(port, verdicts)
            if made is not None:
                listeners.append(made)
            continue
        if verdicts[0].listener.protocol == "HTTPS":
            https, tables = _https_port(port, verdicts, https_hosts)
            listeners.append(https)
            route_tables.extend(tables)
            unscoped.extend(https_port_scoping(port, verdicts))
        else:
            table = RouteTable(listener_name(port), http_hosts(port, verdicts))
            scoped, problems = http_port_scoping(port, verdicts, table.virtual_hosts, scoped_port)
            unscoped.extend(problems)
            scoped_port = port if scoped else scoped_port
            listeners.append(
                HttpListener(
                    name=table.name,
                    port=port,
                    route_table=table.name,
                    stateful_sessions=keeps_sessions(table),
                    credentials=injected_credentials(table.virtual_hosts),
                    scoped=scoped,
                )
            )
            route_tables.append(table)
    return NodeGroup(
        name=name,
        listeners=tuple(listeners),
        route_tables=tuple(route_tables),
        clusters=clusters,
        unscoped=tuple(unscoped),
    )


def keeps_sessions(table: RouteTable) -> bool:
    """Whether some route of `table` keeps sessions (an XBackendTrafficPolicy's
    sessionPersistence): its connection manager then runs Envoy's stateful_session filter."""
    return any(host.keeps_sessions for host in table.virtual_hosts)


def https_listener_name(port: int) -> str:
    return f"https-{port}"


def https_route_table_name(port: int, hostname: str | None) -> str:
    base = https_listener_name(port)
    return f"{base}/{hostname}" if hostname else base


def shadowed_listeners(gateways: Sequence[GatewayVerdict]) -> dict[tuple[ObjectKey, int], Problem]:
    """The served listeners a group of several Gateways leaves out, by (Gateway, listener
    index), each with a Problem on its Gateway: another Gateway's listener took the port
    (another protocol) or the hostname.

    Each Gateway's own group still serves them; only Envoys given every Gateway lose them.
    """
    _, shadowed = _assign_ports(gateways)
    problems = {}
    for verdict, winner in shadowed:
        listener, other = verdict.listener, winner.listener
        taken = (
            f"uses {other.protocol} there"
            if other.protocol != listener.protocol
            else f"has the same hostname ({other.hostname})"
            if other.hostname
            else "has no hostname either"
        )
        problems[(verdict.gateway, verdict.index)] = Problem(
            verdict.gateway,
            f"spec.listeners[{verdict.index}]",
            SHADOWED_LISTENER,
            f"listener {listener.name!r} on port {listener.port} is left out of the "
            f"configuration of Envoys that serve every Gateway (node.cluster naming no "
            f"Gateway): listener {other.name!r} of Gateway {winner.gateway.namespace}/"
            f"{winner.gateway.name} {taken}; Envoys whose node.cluster is "
            f"{verdict.gateway.namespace}/{verdict.gateway.name} serve it",
        )
    return problems


_Ports = dict[tuple[int, str], list[ListenerVerdict]]


def listeners_by_port(gateways: Sequence[GatewayVerdict]) -> _Ports:
    """The listeners Envoy gets, by (port, space) (see _assign_ports)."""
    return _assign_ports(gateways)[0]


def _assign_ports(
    gateways: Sequence[GatewayVerdict],
) -> tuple[_Ports, list[tuple[ListenerVerdict, ListenerVerdict]]]:
    """Served listeners per port (and space: UDP or TCP), and (left out, the listener that
    took its place). Across Gateways the first protocol seen on a port wins it, and of
    listeners with the same hostname the first: Envoy has one listener per port."""
    ports: _Ports = {}
    shadowed: list[tuple[ListenerVerdict, ListenerVerdict]] = []
    for gateway in gateways:
        for verdict in gateway.served():
            taken = ports.setdefault(port_key(verdict.listener), [])
            if taken and taken[0].listener.protocol != verdict.listener.protocol:
                shadowed.append((verdict, taken[0]))
                continue
            same = next(
                (v for v in taken if v.listener.hostname == verdict.listener.hostname), None
            )
            if same is not None:
                shadowed.append((verdict, same))
                continue
            taken.append(verdict)
    return ports, shadowed


def _listener_routes(
    verdicts: Iterable[ListenerVerdict], by_listener: _ByListener, scheme: Scheme
) -> list[ListenerRoutes]:
    return [
        ListenerRoutes(
            listener_hostname=verdict.listener.hostname,
            scheme=scheme,
            domains=item.attachment.domains,
            route_hostnames=item.route_hostnames,
            routes=item.routes,
        )
        for verdict in verdicts
        for item in by_listener.get(
            (verdict.gateway.namespace, verdict.gateway.name, verdict.name), ()
        )
    ]


def _https_port(
    port: int, verdicts: Sequence[ListenerVerdict], https_hosts: HttpsHosts
) -> tuple[HttpsListener, list[RouteTable]]:
    hostnames = [v.listener.hostname for v in verdicts]
    chains: list[TlsFilterChain] = []
    tables: list[RouteTable] = []
    # Chains with server names first, most specific first; the catch-all chain last.
    for verdict in sorted(verdicts, key=lambda v: specificity(v.listener.hostname or ANY_HOST)):
        hostname = verdict.listener.hostname
        misdirected = (Route(RouteMatch("PathPrefix", "/"), MISDIRECTED, verdict.gateway),)
        # Every listener hostname of the port is passed for isolation; a virtual host left
        # empty by it belongs to another listener (another SNI): answer 421, not 404.
        own = hostname or ANY_HOST
        hosts = [
            host
            if host.routes or owner(host.name, hostnames) == own
            else dataclasses.replace(host, routes=misdirected)
            for host in https_hosts(port, verdicts, verdict)
        ]
        if hostname and not any(host.domains == (ANY_HOST,) for host in hosts):
            hosts.append(VirtualHost(ANY_HOST, (ANY_HOST,), misdirected))
        name = https_route_table_name(port, hostname)
        tables.append(RouteTable(name, tuple(hosts)))
        chains.append(
            TlsFilterChain(
                server_names=(hostname,) if hostname else (),
                certificates=verdict.certificates,
                route_table=name,
                client_validation=verdict.client_validation,
                stateful_sessions=keeps_sessions(tables[-1]),
                credentials=injected_credentials(hosts),
            )
        )
    return HttpsListener(https_listener_name(port), port, tuple(chains)), tables


def injected_credentials(hosts: Iterable[VirtualHost]) -> tuple[InjectedCredential, ...]:
    """The credentials the routes of `hosts` inject, by name: the connection manager serving
    them has one HTTP filter for each."""
    found: dict[str, InjectedCredential] = {}
    for host in hosts:
        for credential in host.credentials:  # most hosts have none
            found.setdefault(credential.name, credential)
    return tuple(found[name] for name in sorted(found))


def _referenced_clusters(
    route_tables: Iterable[RouteTable], listeners: Iterable[Listener] = ()
) -> tuple[str, ...]:
    http: set[str] = set()
    for table in route_tables:
        for virtual_host in table.virtual_hosts:
            http |= host_clusters(virtual_host)
    return tuple(sorted(http | l4_clusters(listeners)))


def host_clusters(virtual_host: VirtualHost) -> set[str]:
    """The clusters a virtual host's routes send requests (or mirrored copies, or the token
    requests of their OAuth2 credentials) to."""
    clusters: set[str] = set()
    for route in virtual_host.routes:
        action = route.action
        if isinstance(action, Forward):
            # Not action.clusters: a tuple made for each of ten thousand routes.
            for backend in action.backends:
                if backend.cluster is not None:
                    clusters.add(backend.cluster)
            for mirror in action.mirrors:
                clusters.add(mirror.cluster)
            for credential in route.credentials:  # most routes have none
                if credential.oauth2 is not None:  # its token endpoint's
                    clusters.add(credential.oauth2.cluster)
    return clusters


def l4_clusters(listeners: Iterable[Listener]) -> set[str]:
    """The clusters TCP, TLS and UDP listeners forward to."""
    l4: set[str] = set()
    for listener in listeners:
        if isinstance(listener, UdpListener):
            l4.update(listener.forward.clusters)
        elif isinstance(listener, TcpListener):
            l4.update(c for chain in listener.filter_chains for c in chain.forward.clusters)
    return l4
