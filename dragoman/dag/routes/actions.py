"""What one route rule does with the requests it matches: forward (with rewrites, mirrors,
timeouts and retries), redirect, or answer an error itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.model import (
    H2C,
    AggregateCluster,
    Cluster,
    CorsPolicy,
    DirectResponse,
    DnsCluster,
    Forward,
    HeaderEdits,
    InjectedCredential,
    Mirror,
    Problem,
    Redirect,
    Retry,
    UpstreamProtocol,
    has_client_ip_affinity,
    hash_policy_of,
    session_of,
)
from dragoman.dag.routes.backends import resolve_backend_ref, resolve_backends
from dragoman.dag.routes.credentials import NO_CREDENTIALS, rule_credentials
from dragoman.dag.routes.filters import NO_FILTERS, RuleFilters, rule_filters
from dragoman.dag.routes.retries import rule_retry
from dragoman.objects import (
    BackendRef,
    GRPCRoute,
    GRPCRouteRule,
    HTTPRoute,
    HTTPRouteRule,
    HTTPRouteTimeouts,
    RouteFilter,
)

# What a rule with no usable backend answers: the Gateway API asks for 500 (HTTPRoute) and
# UNAVAILABLE (GRPCRoute), which gRPC clients read from HTTP 503.
NO_BACKEND = DirectResponse(status=500)
NO_GRPC_BACKEND = DirectResponse(status=503)


@dataclass(frozen=True, slots=True)
class RuleAction:
    action: Forward | Redirect | DirectResponse
    request_headers: HeaderEdits
    response_headers: HeaderEdits
    # Every valid cluster the action sends requests to (and its OAuth2 token requests).
    clusters: tuple[Cluster, ...]
    problems: tuple[Problem, ...]
    cors: CorsPolicy | None = None
    credentials: tuple[InjectedCredential, ...] = ()


def http_rule_action(
    route: HTTPRoute,
    rule_index: int,
    rule: HTTPRouteRule,
    context: BuildContext,
) -> RuleAction:
    # ReplacePrefixMatch is only valid with exactly one PathPrefix match (a CRD rule); only
    # filters read the prefix.
    prefix = rule.matches[0].path.value if rule.filters and len(rule.matches) == 1 else ""
    retry = rule_retry(rule.retry) if rule.retry is not None else None
    return _rule_action(
        route,
        rule_index,
        rule.filters,
        rule.backend_refs,
        context,
        prefix=prefix,
        timeouts=http_timeouts(rule.timeouts, retries=retry is not None),
        retry=retry,
    )


def grpc_rule_action(
    route: GRPCRoute,
    rule_index: int,
    rule: GRPCRouteRule,
    context: BuildContext,
) -> RuleAction:
    # gRPC calls may stream for as long as the client's deadline allows: no route timeout.
    return _rule_action(
        route,
        rule_index,
        rule.filters,
        rule.backend_refs,
        context,
        prefix="",
        timeouts=(0, None),
        grpc=True,
    )


def http_timeouts(
    timeouts: HTTPRouteTimeouts, *, retries: bool = False
) -> tuple[int | None, int | None]:
    """(route timeout, per-try timeout) in milliseconds for an HTTPRoute rule's `timeouts`.

    `request` bounds the whole exchange; `backendRequest` each attempt at a backend. Without
    retries there is one attempt, so a lone `backendRequest` bounds the whole exchange too;
    with retries it bounds each attempt, and the attempts (a known number) bound the
    exchange, so it has no timeout of its own. With neither, None keeps Envoy's 15 s default:
    a safe bound rather than none. 0 means no timeout.
    """
    request, backend = timeouts.request_ms, timeouts.backend_request_ms
    if request is None:
        return (0, backend) if retries and backend else (backend, None)
    if backend is None or backend == 0 or (request != 0 and backend >= request):
        return request, None
    return request, backend


def _rule_action(
    route: HTTPRoute | GRPCRoute,
    rule_index: int,
    filters: Sequence[RouteFilter],
    refs: Sequence[BackendRef],
    context: BuildContext,
    *,
    prefix: str,
    timeouts: tuple[int | None, int | None],
    grpc: bool = False,
    retry: Retry | None = None,
) -> RuleAction:
    # gRPC needs HTTP/2 all the way to the backend.
    protocol: UpstreamProtocol | None = H2C if grpc else None
    no_backend = NO_GRPC_BACKEND if grpc else NO_BACKEND
    # Most rules have no filters: their field path and the route's key are not made then.
    parsed = (
        rule_filters(route.key, f"spec.rules[{rule_index}].filters", filters, prefix)
        if filters
        else NO_FILTERS
    )
    problems = list(parsed.problems)
    credentials, token_clusters, refused = (
        rule_credentials(route.key, rule_index, parsed.injectors, context)
        if parsed.injectors
        else NO_CREDENTIALS
    )
    problems.extend(refused)
    invalid = parsed.invalid or bool(refused)
    clusters: dict[str, Cluster] = {}
    backends = resolve_backends(route, rule_index, refs, context, protocol, clusters, problems)
    action: Forward | Redirect | DirectResponse
    if invalid:
        action, clusters = no_backend, {}
    elif parsed.redirect is not None:
        action, clusters = parsed.redirect, {}  # a redirect needs no backend (the CRD forbids them)
    elif not clusters:
        action = no_backend
    else:
        mirrors = (
            _mirrors(route, rule_index, parsed, context, protocol, problems, clusters)
            if parsed.mirrors
            else ()
        )
        external = affinity = False
        hashed = session = None
        for backend in backends:
            if backend.cluster is not None:
                cluster = clusters[backend.cluster]
                external = external or isinstance(cluster, _EXTERNAL_CLUSTERS)
                affinity = affinity or has_client_ip_affinity(cluster)
                hashed = hashed or hash_policy_of(cluster)
                session = session or session_of(cluster)
        action = Forward(
            backends=backends,
            # External hosts (virtual hosting, TLS) expect their own name in Host, not the
            # gateway's.
            auto_host_rewrite=external,
            host_rewrite=parsed.host_rewrite,
            path_rewrite=parsed.path_rewrite,
            mirrors=mirrors,
            timeout_ms=timeouts[0],
            per_try_timeout_ms=timeouts[1],
            retry=retry,
            grpc=grpc,
            hash_client_ip=affinity,
            hash_policy=hashed,
            session=session,
        )
    if not isinstance(action, Forward):  # nothing sent upstream: no credential, no token
        credentials, token_clusters = (), {}
    return RuleAction(
        action=action,
        request_headers=parsed.request_headers,
        response_headers=parsed.response_headers,
        clusters=tuple(({**clusters, **token_clusters} if token_clusters else clusters).values()),
        problems=tuple(problems),
        cors=parsed.cors,
        credentials=credentials,
    )


# Clusters of external hosts (a tuple: `A | B` would make a new union for every rule).
_EXTERNAL_CLUSTERS = (DnsCluster, AggregateCluster)


def _mirrors(
    route: HTTPRoute | GRPCRoute,
    rule_index: int,
    parsed: RuleFilters,
    context: BuildContext,
    protocol: UpstreamProtocol | None,
    problems: list[Problem],
    clusters: dict[str, Cluster],
) -> tuple[Mirror, ...]:
    """Mirrors whose backendRef resolves; an invalid one is dropped and reported."""
    mirrors: list[Mirror] = []
    for index, spec in parsed.mirrors:
        field = f"spec.rules[{rule_index}].filters[{index}].requestMirror.backendRef"
        resolved = resolve_backend_ref(route, field, spec.backend_ref, context, protocol)
        if isinstance(resolved, Problem):
            problems.append(resolved)
            continue
        # (Only a backend reports its cluster's warnings, not a mirror.)
        cluster = resolved.cluster
        clusters[cluster.name] = cluster
        # A mirror is a request of its own: an external host needs its own name in Host too.
        host = cluster.hostname if isinstance(cluster, DnsCluster) else None
        mirrors.append(Mirror(cluster.name, spec.numerator, spec.denominator, host))
    return tuple(mirrors)
