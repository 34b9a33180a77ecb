"""Gateway API hostnames: a listener's and a route's intersection, and which wildcard covers
which name."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dragoman.dag.model import ANY_HOST


def intersect(listener_hostname: str | None, route_hostnames: Sequence[str]) -> tuple[str, ...]:
    """The domains a route serves on a listener, sorted; empty when the two do not intersect.

    No hostname on either side means any host; the more specific side of each matching pair
    wins, so `*.example.com` and `foo.example.com` intersect as `foo.example.com`.
    """
    listener = listener_hostname.lower() if listener_hostname else None
    routes = {_lowered(hostname) for hostname in route_hostnames}
    if not routes:
        return (listener or ANY_HOST,)
    if listener is None:
        return tuple(sorted(routes))
    domains = {_intersection(listener, route) for route in routes}
    return tuple(sorted(domain for domain in domains if domain is not None))


def _lowered(hostname: str) -> str:
    """The hostname lower-cased: the route's own string when it is already (the domains of
    ten thousand routes then keep no copies)."""
    lowered = hostname.lower()
    return hostname if lowered == hostname else lowered


def _intersection(first: str, second: str) -> str | None:
    if first == second:
        return first
    # A literal `*` is not a wildcard here: neither side may be one (Gateway API validation).
    if first != ANY_HOST and covers(first, second):
        return second
    if second != ANY_HOST and covers(second, first):
        return first
    return None


def covers(wildcard: str, hostname: str) -> bool:
    """`*` covers every other host; `*.example.com` covers `a.example.com`, `a.b.example.com`
    and `*.a.example.com`."""
    if wildcard == ANY_HOST:
        return hostname != ANY_HOST
    if not wildcard.startswith("*."):
        return False
    suffix = wildcard[1:]  # ".example.com"
    return hostname.endswith(suffix) and len(hostname) > len(suffix)


def covering_domains(domain: str) -> list[str]:
    """Every domain that `covers` this one: its broader `*.suffix` wildcards, then `*`."""
    if domain == ANY_HOST:
        return []
    labels = domain.split(".")
    # "a.b.c" is covered by "*.b.c" and "*.c"; "*.b.c" by "*.c" only (never by itself).
    start = 1 if labels[0] != "*" else 2
    return [f"*.{'.'.join(labels[i:])}" for i in range(start, len(labels))] + [ANY_HOST]


def specificity(domain: str) -> tuple[int, int]:
    """Sorts ascending from the most specific: exact names, longer wildcards, then `*`."""
    if domain == ANY_HOST:
        return 2, 0
    return (1 if domain.startswith("*.") else 0), -len(domain)


def listener_host(hostname: str | None) -> str:
    return hostname.lower() if hostname else ANY_HOST


def owner(domain: str, hostnames: Iterable[str | None]) -> str:
    """The most specific listener hostname ("*": none) that matches `domain`."""
    candidates = {hostname or ANY_HOST for hostname in hostnames}
    matching = [h for h in candidates if h == domain or covers(h, domain)]
    return min(matching, key=specificity, default=ANY_HOST)
