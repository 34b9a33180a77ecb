"""The `dragoman.dev/route-tables` annotation of a Gateway: how its HTTP routes reach Envoy.

`shared` (the default): one RouteConfiguration per connection manager, fetched over RDS and
re-sent whole on every change. `per-host`: one ScopedRouteConfiguration per hostname, each
holding its own route table (scoped RDS keyed on the Host header), so that a change re-sends,
and Envoy rebuilds, only the hostnames it touched. A connection manager whose routes cannot be
scoped (a wildcard or missing hostname, a TLS port) stays on RDS and its Gateway says why
(`dragoman.dag.node_groups.route_scopes`).
"""

from __future__ import annotations

from dragoman.dag.model import Problem
from dragoman.objects import Gateway

ROUTE_TABLES = "dragoman.dev/route-tables"
SHARED = "shared"
PER_HOST = "per-host"
INVALID_ANNOTATION = "InvalidAnnotation"


def route_tables_per_host(gateway: Gateway) -> bool | Problem:
    """Whether the Gateway asks for a route table per hostname, or why its annotation is
    refused (then it is served as without it)."""
    value = gateway.meta.annotations.get(ROUTE_TABLES)
    if value is None or value == SHARED:
        return False
    if value == PER_HOST:
        return True
    return Problem(
        gateway.key,
        f"metadata.annotations[{ROUTE_TABLES}]",
        INVALID_ANNOTATION,
        f"annotation {ROUTE_TABLES} must be {SHARED!r} or {PER_HOST!r}, not {value[:64]!r}: "
        "served with one route table per port",
    )
