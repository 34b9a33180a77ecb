"""The proxyless gRPC clients' side of a controller update: the Service targets of the store
and their translation, both left to be made when a gRPC client first asks."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.dag.proxyless.targets import (
    ServiceTargets,
    dns_refreshed_targets,
    refreshed_service_targets,
    service_targets,
)
from dragoman.envoy.grpc.grpc_snapshots import GrpcSnapshots
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.snapshots.resources import Snapshot
from dragoman.store import Store


def grpc_snapshots(
    dag: Dag,
    envoy: Mapping[str, Snapshot],
    store: Store,
    *,
    build_options: BuildOptions,
    translate_options: TranslateOptions,
    dns: DnsObservations,
    previous: GrpcSnapshots | None = None,
    previous_store: Store | None = None,
    dns_changed: Collection[str] | None = None,
) -> GrpcSnapshots:
    """What gRPC clients get for `dag`. With `previous_store` (the store `previous` was made
    from), only endpoints changed: Service targets already made are refreshed, not rebuilt;
    likewise with `dns_changed`, the names whose checked addresses alone changed."""
    earlier = previous.made_targets if previous is not None else None

    def targets() -> ServiceTargets:
        if earlier is not None and previous_store is not None:
            return refreshed_service_targets(earlier, store, previous_store, build_options)
        if earlier is not None and dns_changed is not None:
            return dns_refreshed_targets(
                earlier,
                dns,
                build_options.external_names,
                set(dns_changed),
                build_options.dns_lookup_family,
            )
        return service_targets(store, build_options, dns)

    return GrpcSnapshots(dag, envoy, targets, translate_options, reuse=previous)
