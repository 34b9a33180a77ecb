"""The virtual hosts of one port: Gateway API hostname semantics in Envoy's domain matching.

Envoy picks exactly one virtual host per request: the most specific domain that matches
(exact, then the longest `*.suffix`, then `*`). The Gateway API asks for more:

- Listener isolation: a request belongs to the most specific listener hostname that matches
  it, and only routes attached to that listener may serve it.
- Routes of every hostname that matches a request compete, `*.example.com` routes included
  for `foo.example.com`; precedence goes to the most specific matching route hostname, then
  to the match rules of routes.py.

So every domain that matters (each listener hostname, each attached route domain) becomes a
virtual host holding, in precedence order, every route its requests may reach.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from dragoman.dag.frontends.hostnames import (
    covering_domains,
    covers,
    listener_host,
)
from dragoman.dag.model import Redirect, Route, VirtualHost
from dragoman.dag.routes.ranking import Precedence, RankedRoute

# What clients speak to a listener.
Scheme = Literal["http", "https"]

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class ListenerRoutes:
    """The routes of one route object, accepted by one listener of this port."""

    listener_hostname: str | None  # None: the listener takes any host
    scheme: Scheme  # what clients speak to the listener
    domains: tuple[str, ...]  # route hostnames intersected with the listener's
    route_hostnames: tuple[str, ...]  # the route's own spec.hostnames
    routes: tuple[RankedRoute, ...]


def virtual_hosts(
    port: int, listener_hostnames: Iterable[str | None], served: Sequence[ListenerRoutes]
) -> tuple[VirtualHost, ...]:
    """The virtual hosts of `port`, whose listeners have `listener_hostnames`, by domain."""
    listeners = {listener_host(h) for h in listener_hostnames} | {
        listener_host(item.listener_hostname) for item in served
    }
    domains = listeners | {domain for item in served for domain in item.domains}
    # Indexed so each domain costs its own label count and the routes it gets, not a scan
    # of every domain and every route (ten thousand hostnames on one port are ordinary).
    served_by_domain: dict[str, list[int]] = {}
    for index, item in enumerate(served):
        for domain in set(item.domains):
            served_by_domain.setdefault(domain, []).append(index)
    result = []
    for domain in sorted(domains):
        covering = covering_domains(domain)
        reaching = sorted({i for d in (domain, *covering) for i in served_by_domain.get(d, ())})
        host = domain_virtual_host(
            port, domain, domains, listeners, [served[i] for i in reaching], covering
        )
        if host is not None:
            result.append(host)
    return tuple(result)


def domain_virtual_host(
    port: int,
    domain: str,
    domains: Container[str],
    listeners: Container[str],
    reaching: Iterable[ListenerRoutes],
    covering: Sequence[str] | None = None,
) -> VirtualHost | None:
    """The virtual host of `domain`, one of the port's `domains`, or None when it needs none.

    `listeners`: the port's listener hosts (`*` for none); `reaching`: in served order, every
    item with `domain` or a domain covering it among its own (others are ignored);
    `covering`: covering_domains(domain), when the caller has it.
    """
    if covering is None:
        covering = covering_domains(domain)
    matching = [domain, *(d for d in covering if d in domains)]
    # From the most specific to the least (see covering_domains): the first listener host
    # is the most specific.
    listener = next(d for d in matching if d in listeners)
    routes: dict[Precedence, Route] = {}
    for item in reaching:
        if listener_host(item.listener_hostname) != listener:
            continue
        hostname_rank = _hostname_rank(item.route_hostnames, domain)
        for ranked in item.routes:
            route = ranked.route
            if isinstance(route.action, Redirect):
                route = _for_listener(route, port, item.scheme)
            # The route kind (gRPC routes first, see routes.py) comes before hostname
            # precedence, so a gRPC call never falls to an HTTPRoute while a GRPCRoute
            # matches it. Keyed by precedence: a route reaching a domain twice is one.
            precedence = ranked.precedence
            routes[precedence[:1] + hostname_rank + precedence[1:]] = route
    # An empty virtual host still matters when it keeps a broader one from taking its
    # requests (another listener's routes must not serve them): Envoy answers 404.
    shields = len(matching) > 1
    if routes or shields:
        ordered = tuple(routes[key] for key in sorted(routes))
        return VirtualHost(name=domain, domains=(domain,), routes=ordered)
    return None


def placed_redirect(redirect: Redirect, listener_port: int, listener_scheme: str) -> Redirect:
    """A redirect with the port its Location needs on this listener (Gateway API rules).

    No port in the filter: the scheme's well-known port when the filter sets a scheme, else
    the listener's. Location carries no port when it is the default of its scheme (the
    Gateway API's SHOULD). Envoy writes a port only when told one: the listeners strip the
    port from Host before routing (strip_any_host_port), so the request's own never leaks in.
    """
    scheme = redirect.scheme or listener_scheme
    if redirect.port is not None:
        port = redirect.port
    elif redirect.scheme is not None:
        port = DEFAULT_PORTS.get(redirect.scheme, listener_port)
    else:
        port = listener_port
    location_port = None if port == DEFAULT_PORTS.get(scheme) else port
    return dataclasses.replace(redirect, location_port=location_port)


def _for_listener(route: Route, port: int, scheme: str) -> Route:
    """A route that redirects, with the port its Location needs on this listener."""
    assert isinstance(route.action, Redirect)
    return dataclasses.replace(route, action=placed_redirect(route.action, port, scheme))


def _hostname_rank(route_hostnames: Sequence[str], domain: str) -> tuple[int, int]:
    """Gateway API hostname precedence: the most characters in a matching non-wildcard route
    hostname, then in any matching route hostname. A route without hostnames ranks last."""
    best = (0, 0)
    for hostname in route_hostnames:
        hostname = hostname.lower()
        if hostname == domain or covers(hostname, domain):
            exact = 0 if hostname.startswith("*") else len(hostname)
            best = max(best, (exact, len(hostname)))
    return -best[0], -best[1]
