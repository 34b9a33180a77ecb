"""Inputs that shape clusters beyond the Services themselves, built once per DAG build:
BackendTLSPolicies (from the store) and the DNS check's observations (from outside)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dragoman.dag.backend_policies import NO_BACKEND_POLICIES, BackendPolicies
from dragoman.dag.backend_tls_policy import BackendTlsPolicies
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.reference_grants import ReferenceGrants
from dragoman.dag.xbackend_traffic_policies import (
    NO_XBACKEND_TRAFFIC_POLICIES,
    XBackendTrafficPolicies,
)
from dragoman.store import Store


@dataclass(frozen=True, slots=True)
class UpstreamInputs:
    tls_policies: BackendTlsPolicies = field(default_factory=BackendTlsPolicies)
    dns: DnsObservations = field(default_factory=dict)
    backend_policies: BackendPolicies = NO_BACKEND_POLICIES
    traffic_policies: XBackendTrafficPolicies = NO_XBACKEND_TRAFFIC_POLICIES


NO_UPSTREAM_INPUTS = UpstreamInputs()


def upstream_inputs(store: Store, dns: DnsObservations | None) -> UpstreamInputs:
    policies = BackendTlsPolicies(
        store.backend_tls_policies.values(), store.config_maps, store.secrets
    )
    backend = (
        BackendPolicies.judged(
            store.backend_policies.values(), ReferenceGrants(store.reference_grants.values())
        )
        if store.backend_policies
        else NO_BACKEND_POLICIES
    )
    traffic = (
        XBackendTrafficPolicies.judged(store.xbackend_traffic_policies.values())
        if store.xbackend_traffic_policies
        else NO_XBACKEND_TRAFFIC_POLICIES
    )
    return UpstreamInputs(
        tls_policies=policies, dns=dns or {}, backend_policies=backend, traffic_policies=traffic
    )
