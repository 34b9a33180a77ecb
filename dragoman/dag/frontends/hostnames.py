"""Gateway API hostname intersection between a listener and an HTTPRoute."""

from __future__ import annotations

from collections.abc import Sequence

ANY_HOST = "*"


def intersect(listener_hostname: str | None, route_hostnames: Sequence[str]) -> tuple[str, ...]:
    """The domains a route serves on a listener, sorted; empty when the two do not intersect.

    No hostname on either side means any host; the more specific side of each matching pair
    wins, so `*.example.com` and `foo.example.com` intersect as `foo.example.com`.
    """
    listener = listener_hostname.lower() if listener_hostname else None
    routes = {hostname.lower() for hostname in route_hostnames}
    if not routes:
        return (listener or ANY_HOST,)
    if listener is None:
        return tuple(sorted(routes))
    domains = {_intersection(listener, route) for route in routes}
    return tuple(sorted(domain for domain in domains if domain is not None))


def _intersection(first: str, second: str) -> str | None:
    if first == second:
        return first
    if covers(first, second):
        return second
    if covers(second, first):
        return first
    return None


def covers(wildcard: str, hostname: str) -> bool:
    """`*.example.com` covers `a.example.com`, `a.b.example.com` and `*.a.example.com`."""
    if not wildcard.startswith("*."):
        return False
    suffix = wildcard[1:]  # ".example.com"
    return hostname.endswith(suffix) and len(hostname) > len(suffix)
