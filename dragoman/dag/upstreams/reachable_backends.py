"""The Services and external names one route's backendRefs (mirrors, and the OAuth2 token
endpoints of the CredentialInjectors it names, included) reach, whether or not a cluster
could be built for them: for BackendTLSPolicy ancestors and the DNS check."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.external_names import (
    in_cluster_target,
    is_cluster_local,
    normalise,
    unsafe_reason,
)
from dragoman.dag.reference_grants import (
    Referrer,
    Target,
    route_referrer,
    service_target,
)
from dragoman.dag.upstreams.clusters import MAX_ALIAS_HOPS
from dragoman.dag.upstreams.in_cluster_first import preferred_service
from dragoman.dag.upstreams.xbackends import host_refusal
from dragoman.objects import (
    BackendRef,
    CredentialInjector,
    GRPCRoute,
    HTTPRoute,
    L4Route,
    L4RouteRule,
    Service,
    XBackend,
)
from dragoman.objects.xbackend import XBACKEND_GROUP
from dragoman.store import NamespacedName


@dataclass(frozen=True, slots=True)
class RouteBackendNames:
    services: frozenset[NamespacedName]  # every Service reached (aliases and preferences too)
    # External names it forwards to that pass the literal and domain checks, sorted.
    hostnames: tuple[str, ...]
    # The XBackends it names (that exist, where a ReferenceGrant allows it).
    xbackends: frozenset[NamespacedName] = frozenset()


NO_BACKEND_NAMES = RouteBackendNames(frozenset(), ())


def route_backend_names(
    route: HTTPRoute | GRPCRoute | L4Route, context: BuildContext
) -> RouteBackendNames:
    reached: set[NamespacedName] = set()
    hostnames: set[str] = set()
    xbackends: set[NamespacedName] = set()
    referrer = route_referrer(route.kind, route.meta.namespace)
    for ref in _backend_refs(route, context):
        if (ref.group, ref.kind) == (XBACKEND_GROUP, XBackend.kind):
            _xbackend(ref, referrer, route.meta.namespace, context, xbackends, hostnames)
            continue
        if ref.group != "" or ref.kind != "Service":
            continue
        namespace = ref.namespace or route.meta.namespace
        if not context.grants.permits(referrer, service_target(namespace, ref.name)):
            continue
        service = context.services.get((namespace, ref.name))
        if service is not None:
            _follow(service, context, reached, hostnames)
    if xbackends:
        return RouteBackendNames(frozenset(reached), tuple(sorted(hostnames)), frozenset(xbackends))
    return RouteBackendNames(frozenset(reached), tuple(sorted(hostnames)))


def _xbackend(
    ref: BackendRef,
    referrer: Referrer,
    namespace: str,
    context: BuildContext,
    xbackends: set[NamespacedName],
    hostnames: set[str],
) -> None:
    """Adds the XBackend a backendRef names, and its name when the DNS check may resolve it
    (xbackends.py refuses the others before any check)."""
    key = (ref.namespace or namespace, ref.name)
    target = Target(XBACKEND_GROUP, XBackend.kind, *key)
    backend = context.store.xbackends.get(key)
    if backend is None or not context.grants.permits(referrer, target):
        return
    xbackends.add(key)
    if host_refusal(backend, normalise(backend.hostname), context) is None:
        hostname = normalise(backend.hostname)
        if context.options.external_names.domain_refusal(hostname) is None:
            hostnames.add(hostname)


def _backend_refs(
    route: HTTPRoute | GRPCRoute | L4Route, context: BuildContext
) -> Iterator[BackendRef]:
    injectors = context.store.credential_injectors
    for rule in route.rules:
        yield from rule.backend_refs
        if isinstance(rule, L4RouteRule):
            continue
        for route_filter in rule.filters:
            if route_filter.request_mirror is not None:
                yield route_filter.request_mirror.backend_ref
            elif (ref := route_filter.extension_ref) is not None and injectors:
                # An injector in the route's namespace: its token endpoint's is too.
                injector = injectors.get((route.meta.namespace, ref.name))
                if ref.kind == CredentialInjector.kind and injector and injector.oauth2:
                    yield injector.oauth2.token_endpoint.backend_ref


def _follow(
    service: Service, context: BuildContext, reached: set[NamespacedName], hostnames: set[str]
) -> None:
    """Adds the Service, the Services its aliases lead to, and the external name it ends at."""
    services, options = context.services, context.options
    for _ in range(MAX_ALIAS_HOPS + 1):
        key = (service.meta.namespace, service.meta.name)
        if key in reached:
            return
        reached.add(key)
        if not service.is_external_name or unsafe_reason(service.external_name) is not None:
            return
        preference = preferred_service(service, services)
        if preference is not None and preference.service is not None:
            reached.add((preference.service.meta.namespace, preference.service.meta.name))
        target = in_cluster_target(service.external_name, options.cluster_domain)
        if target is None:
            hostname = normalise(service.external_name)
            allowed = options.external_names.domain_refusal(hostname) is None
            # With spec.externalIPs the name is never resolved: traffic goes to those IPs.
            local = is_cluster_local(hostname, options.cluster_domain)
            if allowed and not local and not service.external_ips:
                hostnames.add(hostname)
            return
        referrer = Referrer("", "Service", service.meta.namespace)
        aliased = services.get(target)
        if aliased is None or not context.grants.permits(referrer, service_target(*target)):
            return
        service = aliased
