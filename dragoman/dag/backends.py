"""HTTPRoute backendRefs to weighted backends, and a rule's backends to its route action."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.clusters import Unresolved, service_cluster
from dragoman.dag.model import (
    Backend,
    Cluster,
    DirectResponse,
    DnsCluster,
    Forward,
    Problem,
)
from dragoman.dag.options import BuildOptions
from dragoman.objects import BackendRef, HTTPRoute, HTTPRouteRule, Service
from dragoman.store import NamespacedName

# What a rule with no usable backend answers (the Gateway API asks for 500).
NO_BACKEND = DirectResponse(status=500)


@dataclass(frozen=True, slots=True)
class RuleBackends:
    action: Forward | DirectResponse
    clusters: tuple[Cluster, ...]  # the valid clusters the action forwards to
    problems: tuple[Problem, ...]


def resolve_rule(
    route: HTTPRoute,
    rule_index: int,
    rule: HTTPRouteRule,
    services: Mapping[NamespacedName, Service],
    options: BuildOptions,
) -> RuleBackends:
    backends: list[Backend] = []
    clusters: dict[str, Cluster] = {}
    problems: list[Problem] = []
    for ref_index, ref in enumerate(rule.backend_refs):
        field = f"spec.rules[{rule_index}].backendRefs[{ref_index}]"
        resolved = resolve_backend_ref(route, field, ref, services, options)
        if isinstance(resolved, Problem):
            problems.append(resolved)
        if ref.weight <= 0:
            continue  # weight 0 takes no traffic; a bad reference is still reported
        if isinstance(resolved, Problem):
            # Keeps its share of traffic, which then answers 500, as the Gateway API asks.
            backends.append(Backend(cluster=None, weight=ref.weight))
        else:
            clusters[resolved.name] = resolved
            backends.append(Backend(cluster=resolved.name, weight=ref.weight))

    if not clusters:
        return RuleBackends(action=NO_BACKEND, clusters=(), problems=tuple(problems))
    external = any(isinstance(cluster, DnsCluster) for cluster in clusters.values())
    # External hosts (virtual hosting, TLS) expect their own name in Host, not the gateway's.
    action = Forward(backends=tuple(backends), auto_host_rewrite=external)
    return RuleBackends(action=action, clusters=tuple(clusters.values()), problems=tuple(problems))


def resolve_backend_ref(
    route: HTTPRoute,
    field: str,
    ref: BackendRef,
    services: Mapping[NamespacedName, Service],
    options: BuildOptions,
) -> Cluster | Problem:
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
    if namespace != route.meta.namespace:
        return problem(
            "RefNotPermitted",
            f"backendRef to Service {namespace}/{ref.name} in another namespace needs a "
            "ReferenceGrant (not supported yet)",
            f"{field}.namespace",
        )
    if ref.port is None:
        return problem(
            "BackendNotFound",
            f"backendRef to Service {namespace}/{ref.name} needs a port",
            f"{field}.port",
        )
    service = services.get((namespace, ref.name))
    if service is None:
        return problem("BackendNotFound", f"Service {namespace}/{ref.name} not found")

    resolved = service_cluster(service, ref.port, services, options)
    if isinstance(resolved, Unresolved):
        at = f"{field}.port" if resolved.port_at_fault else field
        return problem(resolved.reason, resolved.message, at)
    return resolved
