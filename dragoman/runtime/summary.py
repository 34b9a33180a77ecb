"""Counts over what is being served, for /metrics and /debug: objects and invalid objects by
kind, external names by state, connected clients by kind. Pure functions of their inputs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final, Literal, get_args

from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.external_names import unsafe_reason
from dragoman.dag.model import AggregateCluster, Dag
from dragoman.dag.options import BuildOptions
from dragoman.objects import ObjectKey
from dragoman.objects.kinds import KINDS
from dragoman.store import Store
from dragoman.xds.protocol.client_kind import is_grpc_client
from dragoman.xds.server.stream_registry import ConnectedStream

ExternalNameState = Literal["served", "refused", "dns_failed"]
EXTERNAL_NAME_STATES: tuple[ExternalNameState, ...] = get_args(ExternalNameState)
SERVED: Final = "served"
REFUSED: Final = "refused"
DNS_FAILED: Final = "dns_failed"


def object_counts(store: Store | None) -> Counter[str]:
    counts: Counter[str] = Counter()
    if store is None:
        return counts
    for kind in KINDS:
        held = len(getattr(store, kind.store_field))
        if held:
            counts[kind.kind] = held
    return counts


def invalid_counts(dag: Dag | None, unreadable: Iterable[str] = ()) -> Counter[str]:
    """Objects with at least one problem (refused, or partly refused), by kind; `unreadable`:
    `kind/ns/name` (or `kind/name`) of objects the source could not read."""
    keys: set[tuple[str, str]] = set()
    if dag is not None:
        for problem in dag.problems:
            keys.add((problem.object.kind, str(problem.object)))
    for name in unreadable:
        kind = name.split("/", 1)[0] if name else ""
        keys.add((kind or "Unknown", name))
    return Counter(kind for kind, _ in keys)


def external_name_states(
    store: Store | None,
    dag: Dag | None,
    options: BuildOptions,
    dns: DnsObservations,
) -> dict[ObjectKey, ExternalNameState]:
    """The state of every ExternalName Service: served (a cluster for it is served), refused
    (by dragoman's rules or the platform's policy) or dns_failed (the DNS check found no
    address). A name neither served nor refused (no route uses it yet) is left out."""
    if store is None or dag is None:
        return {}
    served = set()
    for cluster in dag.clusters.values():
        parts = cluster.children if isinstance(cluster, AggregateCluster) else (cluster,)
        for part in parts:
            served.add(part.service)
        if isinstance(cluster, AggregateCluster):
            served.add(cluster.service)
    states: dict[ObjectKey, ExternalNameState] = {}
    for service in store.services.values():
        if not service.is_external_name:
            continue
        name = service.external_name.rstrip(".").lower()
        if service.key in served:
            states[service.key] = SERVED
        elif unsafe_reason(name) is not None or options.external_names.domain_refusal(name):
            states[service.key] = REFUSED
        elif options.dns_check and (observation := dns.get(name)) is not None:
            if not observation.addresses:
                states[service.key] = DNS_FAILED
            elif options.external_names.address_refusal(name, observation.addresses):
                states[service.key] = REFUSED
    return states


def client_counts(streams: Iterable[ConnectedStream]) -> Counter[str]:
    """Connected clients (one per node id and peer, whatever number of streams it opened),
    by kind: `envoy` or `grpc` (proxyless gRPC)."""
    seen: set[tuple[str, str, str]] = set()
    for stream in streams:
        if stream.identified:
            kind = "grpc" if is_grpc_client(stream.node) else "envoy"
            seen.add((kind, stream.node_id, stream.peer))
    return Counter(kind for kind, _, _ in seen)
