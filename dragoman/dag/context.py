"""What every step of one DAG build reads, made once per build and handed down as one value:
the store, the operator's options, the ReferenceGrants, and the inputs clusters are shaped by."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.model import Cluster
from dragoman.dag.options import BuildOptions
from dragoman.dag.reference_grants import ReferenceGrants
from dragoman.dag.upstream_inputs import UpstreamInputs, upstream_inputs
from dragoman.objects import ObjectKey, Service
from dragoman.store import NamespacedName, Store


@dataclass(frozen=True, slots=True)
class BuildContext:
    store: Store
    options: BuildOptions
    grants: ReferenceGrants  # the store's ReferenceGrants, indexed
    upstream: UpstreamInputs  # BackendTLSPolicies and DNS check observations
    # The cluster each Service port resolved to (None: none) as routes resolved them, noted
    # for the proxyless gRPC targets, which take them here rather than resolving again.
    resolved_ports: dict[tuple[ObjectKey, int], Cluster | None] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def services(self) -> Mapping[NamespacedName, Service]:
        return self.store.services


def build_context(
    store: Store, options: BuildOptions, dns: DnsObservations | None = None
) -> BuildContext:
    """`dns`: what the DNS check last observed per external name (used when options.dns_check)."""
    return BuildContext(
        store=store,
        options=options,
        grants=ReferenceGrants(store.reference_grants.values()),
        upstream=upstream_inputs(store, dns),
    )
