"""Whether a plain-HTTP port's route table is served as one scope per hostname.

A Gateway annotated `dragoman.dev/route-tables: per-host` asks for it
(`dragoman.dag.frontends.route_tables`). Envoy finds a scope by the Host header (its port
dropped) compared as an exact, case-sensitive string, and a connection manager has either
scopes or one route table: a port is scoped only when every virtual host of its table is an
exact hostname and every listener on it asks; and only one port per group, since Envoy gives
every scoped connection manager all the scopes it fetched. Otherwise the port keeps one
table, and each asking Gateway is told why (a Problem on its listener, which its
dragoman.dev/RouteTablesPerHost condition states): never silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.dag.frontends.listeners import ListenerVerdict
from dragoman.dag.model import Problem, VirtualHost

# The reason of a listener whose Gateway asks for per-host route tables but keeps one.
ROUTE_TABLE_SHARED = "RouteTableShared"


def http_port_scoping(
    port: int,
    verdicts: Sequence[ListenerVerdict],
    hosts: Sequence[VirtualHost],
    scoped_port: int | None = None,
) -> tuple[bool, tuple[Problem, ...]]:
    """Whether the port's table is scoped, and why not for the listeners that ask.
    `scoped_port`: the group's port already scoped, if any."""
    asking = [v for v in verdicts if v.per_host_routes]
    if not asking:
        return False, ()
    reason = _unscopable(verdicts, hosts)
    if reason is None and scoped_port is not None:
        # Envoy gives the scopes it fetches from one source to every scoped connection
        # manager: two scoped ports would each answer for the other's hostnames.
        reason = f"port {scoped_port} is served with a route table per hostname already"
    if reason is None:
        return True, ()
    return False, _told(asking, f"port {port} keeps one route table: {reason}")


def https_port_scoping(port: int, verdicts: Sequence[ListenerVerdict]) -> tuple[Problem, ...]:
    """Why the listeners that ask keep one route table per TLS filter chain."""
    asking = [v for v in verdicts if v.per_host_routes]
    return _told(
        asking,
        f"port {port} keeps one route table per server name: only plain-HTTP ports are "
        "served with a route table per hostname",
    )


def _unscopable(verdicts: Sequence[ListenerVerdict], hosts: Sequence[VirtualHost]) -> str | None:
    other = next((v for v in verdicts if not v.per_host_routes), None)
    if other is not None:
        # Only Envoys given every Gateway mix Gateways on a port (a node.cluster naming none).
        return (
            f"on Envoys that serve every Gateway, listener {other.listener.name!r} of "
            f"{other.gateway} shares it and does not ask for a route table per hostname"
        )
    for host in hosts:
        if not host.exact:
            routes = sorted({str(route.source) for route in host.routes})
            what = f"route {', '.join(routes[:3])}" if routes else "a listener hostname"
            more = f" and {len(routes) - 3} more" if len(routes) > 3 else ""
            why = (
                " (a route without hostnames on a listener without one)" if host.name == "*" else ""
            )
            return (
                f"{what}{more} serves hostname {host.name!r}{why}, which is not exact: scopes "
                "match the Host exactly"
            )
    return None


def _told(asking: Sequence[ListenerVerdict], message: str) -> tuple[Problem, ...]:
    """One Problem per listener that asks."""
    return tuple(
        Problem(v.gateway, f"spec.listeners[{v.index}]", ROUTE_TABLE_SHARED, message)
        for v in asking
    )
