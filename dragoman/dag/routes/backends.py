"""Route backendRefs to weighted backends and the clusters they name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.model import NO_EDITS, Backend, Cluster, HeaderEdits, Problem
from dragoman.dag.reference_grants import (
    not_permitted_message,
    route_referrer,
    service_target,
)
from dragoman.dag.routes.filters import envoy_refuses, header_edits
from dragoman.dag.upstreams.clusters import (
    Unresolved,
    cluster_warnings,
    service_cluster,
    with_protocol,
)
from dragoman.objects import BackendRef, GRPCRoute, HTTPRoute, L4Route


@dataclass(frozen=True, slots=True)
class ResolvedBackends:
    backends: tuple[Backend, ...]  # weight 0 left out; an invalid reference has cluster None
    clusters: tuple[Cluster, ...]  # the valid clusters, each once
    problems: tuple[Problem, ...]


def resolve_backends(
    route: HTTPRoute | GRPCRoute,
    rule_index: int,
    refs: Sequence[BackendRef],
    context: BuildContext,
    protocol: str | None = None,
) -> ResolvedBackends:
    """A rule's backendRefs; `protocol` forces the upstream protocol (GRPCRoute: h2c)."""
    backends: list[Backend] = []
    clusters: dict[str, Cluster] = {}
    problems: list[Problem] = []
    for ref_index, ref in enumerate(refs):
        field = f"spec.rules[{rule_index}].backendRefs[{ref_index}]"
        resolved = resolve_backend_ref(route, field, ref, context, protocol)
        request, response, host, filter_problems = _backend_filters(route, field, ref)
        problems.extend(filter_problems)
        if isinstance(resolved, Problem):
            problems.append(resolved)
        if ref.weight <= 0:
            continue  # weight 0 takes no traffic; a bad reference is still reported
        if isinstance(resolved, Problem) or filter_problems:
            # Keeps its share of traffic, which then answers 500, as the Gateway API asks.
            backends.append(Backend(cluster=None, weight=ref.weight))
            continue
        clusters[resolved.name] = resolved
        problems.extend(
            Problem(route.key, field, "UnsupportedValue", warning)
            for warning in cluster_warnings(resolved, context)
        )
        backends.append(
            Backend(
                cluster=resolved.name,
                weight=ref.weight,
                request_headers=request,
                response_headers=response,
                host_rewrite=host,
            )
        )
    return ResolvedBackends(tuple(backends), tuple(clusters.values()), tuple(problems))


def _backend_filters(
    route: HTTPRoute | GRPCRoute, field: str, ref: BackendRef
) -> tuple[HeaderEdits, HeaderEdits, str | None, list[Problem]]:
    """The header edits and Host a backendRef's own filters ask for, or why they cannot be."""
    if not ref.filters:
        return NO_EDITS, NO_EDITS, None, []
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
    route: HTTPRoute | GRPCRoute | L4Route,
    field: str,
    ref: BackendRef,
    context: BuildContext,
    protocol: str | None = None,
    l4: str | None = None,
) -> Cluster | Problem:
    """The cluster a backendRef names (in `protocol` when given), or why it names none.

    `l4` (TCP or UDP): a cluster for a TCPRoute, TLSRoute or UDPRoute (see service_cluster)."""

    def problem(reason: str, message: str, at: str = field) -> Problem:
        return Problem(object=route.key, field=at, reason=reason, message=message)

    if ref.group != "":
        return problem(
            "InvalidKind",
            f"backendRef group {ref.group!r} is not supported; only core Services (group '')",
            f"{field}.group",
        )
    if ref.kind != "Service":
        return problem(
            "InvalidKind",
            f"backendRef kind {ref.kind!r} is not supported; only 'Service'",
            f"{field}.kind",
        )
    namespace = ref.namespace or route.meta.namespace
    if namespace != route.meta.namespace:  # the same namespace needs no grant
        referrer = route_referrer(route.kind, route.meta.namespace)
        target = service_target(namespace, ref.name)
        if not context.grants.permits(referrer, target):
            return problem(
                "RefNotPermitted", not_permitted_message(referrer, target), f"{field}.namespace"
            )
    if ref.port is None:
        return problem(
            "BackendNotFound",
            f"backendRef to Service {namespace}/{ref.name} needs a port",
            f"{field}.port",
        )
    service = context.services.get((namespace, ref.name))
    if service is None:
        return problem("BackendNotFound", f"Service {namespace}/{ref.name} not found")

    resolved = service_cluster(service, ref.port, context, l4)
    if isinstance(resolved, Unresolved):
        at = f"{field}.port" if resolved.port_at_fault else field
        return problem(resolved.reason, resolved.message, at)
    return resolved if protocol is None else with_protocol(resolved, protocol)
