"""Route backendRefs to weighted backends and the clusters they name."""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.dag.context import BuildContext
from dragoman.dag.model import (
    NO_EDITS,
    UDP,
    Backend,
    Cluster,
    HeaderEdits,
    L4Protocol,
    Problem,
    UpstreamProtocol,
)
from dragoman.dag.reference_grants import (
    Target,
    not_permitted_message,
    route_referrer,
    service_target,
)
from dragoman.dag.routes.filters import envoy_refuses, header_edits
from dragoman.dag.upstreams.clusters import (
    ResolvedCluster,
    Unresolved,
    resolved_cluster,
    with_protocol,
)
from dragoman.dag.upstreams.xbackends import xbackend_cluster
from dragoman.objects import (
    BackendRef,
    CredentialInjector,
    GRPCRoute,
    HTTPRoute,
    L4Route,
    ObjectKey,
    XBackend,
)
from dragoman.objects.xbackend import XBACKEND_GROUP

# What names a backend: a route, or a CredentialInjector's OAuth2 token endpoint.
BackendReferrer = HTTPRoute | GRPCRoute | L4Route | CredentialInjector


def resolve_backends(
    route: HTTPRoute | GRPCRoute,
    rule_index: int,
    refs: Sequence[BackendRef],
    context: BuildContext,
    protocol: UpstreamProtocol | None,
    clusters: dict[str, Cluster],
    problems: list[Problem],
) -> tuple[Backend, ...]:
    """A rule's backendRefs as weighted backends (weight 0 left out; an invalid reference has
    cluster None); `protocol` forces the upstream protocol (GRPCRoute: h2c).

    The valid clusters they name are added to `clusters` (by name), what is wrong with them
    to `problems`: the caller's own, so that nothing is copied for each rule."""
    backends: list[Backend] = []
    for ref_index, ref in enumerate(refs):
        field = f"spec.rules[{rule_index}].backendRefs[{ref_index}]"
        resolved = resolve_backend_ref(route, field, ref, context, protocol)
        if ref.filters:
            request, response, host, filter_problems = _backend_filters(route, field, ref)
            problems.extend(filter_problems)
        else:
            request, response, host, filter_problems = NO_EDITS, NO_EDITS, None, []
        if isinstance(resolved, Problem):
            problems.append(resolved)
        if ref.weight <= 0:
            continue  # weight 0 takes no traffic; a bad reference is still reported
        if isinstance(resolved, Problem) or filter_problems:
            # Keeps its share of traffic, which then answers 500, as the Gateway API asks.
            backends.append(Backend(cluster=None, weight=ref.weight))
            continue
        cluster = resolved.cluster
        clusters[cluster.name] = cluster
        for warning in resolved.warnings:
            problems.append(Problem(route.key, field, "UnsupportedValue", warning))
        backends.append(
            Backend(
                cluster=cluster.name,
                weight=ref.weight,
                request_headers=request,
                response_headers=response,
                host_rewrite=host,
            )
        )
    return tuple(backends)


def _backend_filters(
    route: HTTPRoute | GRPCRoute, field: str, ref: BackendRef
) -> tuple[HeaderEdits, HeaderEdits, str | None, list[Problem]]:
    """The header edits and Host a backendRef's own filters ask for, or why they cannot be."""
    request = response = HeaderEdits()
    host: str | None = None
    problems: list[Problem] = []
    for index, route_filter in enumerate(ref.filters):
        rewrite = route_filter.url_rewrite
        refused = envoy_refuses(route_filter, f"{field}.filters[{index}]")
        if refused:
            problems.extend(
                Problem(
                    route.key,
                    at,
                    "UnsupportedValue",
                    f"{message}; requests sent to this backend answer 500",
                )
                for at, message in refused
            )
            continue
        if route_filter.request_header_modifier is not None:
            request, header_host = header_edits(route_filter.request_header_modifier)
            host = host or header_host
        elif route_filter.response_header_modifier is not None:
            response, _ = header_edits(route_filter.response_header_modifier, host_special=False)
        elif rewrite is not None and rewrite.path is None:
            host = rewrite.hostname or host
        else:
            problems.append(
                Problem(
                    object=route.key,
                    field=f"{field}.filters[{index}].type",
                    reason="UnsupportedValue",
                    message=f"a {route_filter.type} filter"
                    + (" with a path" if rewrite is not None else "")
                    + " is not supported on a single backendRef (supported: "
                    "RequestHeaderModifier, ResponseHeaderModifier, URLRewrite of the hostname); "
                    "requests sent to this backend answer 500",
                )
            )
    return request, response, host, problems


def resolve_backend_ref(
    route: BackendReferrer,
    field: str,
    ref: BackendRef,
    context: BuildContext,
    protocol: UpstreamProtocol | None = None,
    l4: L4Protocol | None = None,
) -> ResolvedCluster | Problem:
    """The cluster a backendRef names (in `protocol` when given) with its warnings, or why it
    names none.

    `l4` (TCP or UDP): a cluster for a TCPRoute, TLSRoute or UDPRoute (see resolved_cluster)."""
    if (ref.group, ref.kind) == (XBACKEND_GROUP, XBackend.kind):
        return _xbackend_cluster(route, field, ref, context, protocol, l4)
    if ref.group != "":
        return _problem(
            route,
            "InvalidKind",
            f"backendRef group {ref.group!r} is not supported; only core Services (group '') "
            f"and XBackends ({XBACKEND_GROUP!r})",
            f"{field}.group",
        )
    if ref.kind != "Service":
        return _problem(
            route,
            "InvalidKind",
            f"backendRef kind {ref.kind!r} is not supported; only 'Service'",
            f"{field}.kind",
        )
    namespace = ref.namespace or route.meta.namespace
    if namespace != route.meta.namespace:  # the same namespace needs no grant
        referrer = route_referrer(route.kind, route.meta.namespace)
        target = service_target(namespace, ref.name)
        if not context.grants.permits(referrer, target):
            return _problem(
                route,
                "RefNotPermitted",
                not_permitted_message(referrer, target),
                f"{field}.namespace",
            )
    if ref.port is None:
        return _problem(
            route,
            "BackendNotFound",
            f"backendRef to Service {namespace}/{ref.name} needs a port",
            f"{field}.port",
        )
    service = context.services.get((namespace, ref.name))
    if service is None:
        message = f"Service {namespace}/{ref.name} not found"
        missing = ObjectKey("Service", namespace, ref.name)
        return _problem(route, "BackendNotFound", message, field, missing)

    resolved = resolved_cluster(service, ref.port, context, l4)
    if isinstance(resolved, Unresolved):
        at = f"{field}.port" if resolved.port_at_fault else field
        return _problem(route, resolved.reason, resolved.message, at)
    if protocol is None:
        return resolved
    return ResolvedCluster(with_protocol(resolved.cluster, protocol), resolved.warnings)


def _xbackend_cluster(
    route: BackendReferrer,
    field: str,
    ref: BackendRef,
    context: BuildContext,
    protocol: UpstreamProtocol | None,
    l4: L4Protocol | None,
) -> ResolvedCluster | Problem:
    """The cluster of a backendRef to an XBackend (across namespaces only with a
    ReferenceGrant), or why there is none."""
    namespace = ref.namespace or route.meta.namespace
    target = Target(XBACKEND_GROUP, XBackend.kind, namespace, ref.name)
    referrer = route_referrer(route.kind, route.meta.namespace)
    if not context.grants.permits(referrer, target):
        message = not_permitted_message(referrer, target)
        return _problem(route, "RefNotPermitted", message, f"{field}.namespace")
    backend = context.store.xbackends.get((namespace, ref.name))
    if backend is None:
        message = f"XBackend {namespace}/{ref.name} not found"
        missing = ObjectKey(XBackend.kind, namespace, ref.name)
        return _problem(route, "BackendNotFound", message, field, missing)
    if ref.port is not None and ref.port != backend.port:
        return _problem(
            route,
            "UnsupportedValue",
            f"XBackend {namespace}/{ref.name} is reached on its spec.port {backend.port}; "
            f"port {ref.port} differs (leave it unset)",
            f"{field}.port",
        )
    if l4 == UDP:
        return _problem(
            route,
            "UnsupportedProtocol",
            f"XBackend {namespace}/{ref.name}: a UDPRoute cannot forward to an XBackend",
            field,
        )
    resolved = xbackend_cluster(backend, context, l4)
    if isinstance(resolved, Unresolved):
        return _problem(route, resolved.reason, resolved.message, field)
    if protocol is None:
        return resolved
    return ResolvedCluster(with_protocol(resolved.cluster, protocol), resolved.warnings)


def _problem(
    route: BackendReferrer,
    reason: str,
    message: str,
    at: str,
    missing: ObjectKey | None = None,
) -> Problem:
    return Problem(object=route.key, field=at, reason=reason, message=message, missing=missing)
