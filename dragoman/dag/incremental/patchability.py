"""When a change may be patched in place: which stores and store fields an entry-by-entry
update handles, what it must make again, and when new DNS check observations change only
addresses. Anything else is a full build."""

from __future__ import annotations

from collections.abc import Iterable

from dragoman.dag.dns_check import DnsObservations, dns_refusal
from dragoman.dag.frontends.listeners import Frontends
from dragoman.dag.incremental.entries import ROUTE_FIELDS
from dragoman.dag.options import BuildOptions
from dragoman.store import NamespacedName, Store

# Store fields whose changes an entry-by-entry update handles; any other change (Gateways,
# GatewayClasses, ListenerSets, Namespaces) is a full build.
PATCHABLE_FIELDS = frozenset(
    {
        "services",
        "endpoint_slices",
        "reference_grants",
        "secrets",
        "config_maps",
        "backend_tls_policies",
        *ROUTE_FIELDS.values(),
    }
)
# Store fields a Service's backend TLS reads (the proxyless Service targets of the Services
# BackendTLSPolicies target are made again when one changes).
BACKEND_TLS_FIELDS = frozenset({"secrets", "config_maps", "backend_tls_policies"})


def patchable(store: Store, judged: Frontends) -> bool:
    """Whether changes to `store` can be patched: not yet with ListenerSets, XBackends,
    XBackendTrafficPolicies, CredentialInjectors, Gateway client certificates or client
    certificate validation (their builds are all full)."""
    return not (
        store.listener_sets
        or store.xbackends
        # Whether a listener keeps sessions follows its routes: made again with them.
        or store.xbackend_traffic_policies
        # A Secret's change reaches the routes whose injectors read it.
        or store.credential_injectors
        or any(
            verdict.client_certificate is not None
            or getattr(verdict.gateway, "frontend_tls", None) is not None
            for verdict in judged.gateways.values()
        )
    )


def policy_targets(*stores: Store) -> set[NamespacedName]:
    """The Services some BackendTLSPolicy of the stores targets."""
    return {
        (policy.meta.namespace, ref.name)
        for store in stores
        for policy in store.backend_tls_policies.values()
        for ref in policy.target_refs
    }


def reads_config_maps(store: Store) -> bool:
    """Whether a build reads ConfigMaps: CA certificates of BackendTLSPolicies and of
    Gateways' client certificate validation."""
    return bool(store.backend_tls_policies) or any(
        gateway.frontend_tls is not None for gateway in store.gateways.values()
    )


def needs_names(store: Store, options: BuildOptions) -> bool:
    """Whether routes must record the backends they reach (as dag.build decides)."""
    return bool(store.backend_tls_policies or store.xbackends) or options.dns_check


def serves_alike(
    options: BuildOptions,
    before: DnsObservations,
    after: DnsObservations,
    observed: Iterable[str],
) -> bool:
    """Whether every name `observed` anew (from `before` to `after`) is served both times
    (the DNS check allows it): then its clusters stay as they are."""
    if not options.dns_check:
        return False
    policy = options.external_names
    return all(
        dns_refusal(name, before.get(name), policy) is None
        and dns_refusal(name, after.get(name), policy) is None
        for name in observed
    )
