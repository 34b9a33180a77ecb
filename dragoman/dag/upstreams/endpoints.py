"""EndpointSlices to load assignments: the EDS side of the DAG, which can be refreshed alone."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable, Mapping, Sequence

from dragoman.dag.dns_check import DnsObservations, served_addresses
from dragoman.dag.endpoint_readiness import served_port
from dragoman.dag.external_name_policy import ExternalNamePolicy, Network
from dragoman.dag.model import (
    AggregateCluster,
    Cluster,
    Dag,
    Deferred,
    DnsCluster,
    EdsCluster,
    LbEndpoint,
    LoadAssignment,
    Locality,
    Problem,
    ServiceTargets,
)
from dragoman.dag.patched_mapping import PatchedDict
from dragoman.dag.upstreams.endpoint_addresses import endpoint_address_refusal, slice_problems
from dragoman.objects import EndpointSlice
from dragoman.store import NamespacedName, Store


def load_assignment(
    cluster: EdsCluster, slices: Sequence[EndpointSlice], allowed: Sequence[Network] = ()
) -> LoadAssignment:
    """The ready endpoints of a Service port, one locality per zone; addresses in loopback,
    link-local, unspecified or cloud-metadata ranges (outside `allowed`) are dropped."""
    zoned: set[tuple[str, str, int]] = set()
    for endpoint_slice in slices:
        if endpoint_slice.address_type == "FQDN":
            continue  # Envoy's EDS takes addresses only
        slice_port = served_port(cluster, endpoint_slice.ports)
        if slice_port is None:
            continue
        port = slice_port.port
        for endpoint in endpoint_slice.endpoints:
            if not endpoint.ready:
                continue
            # The addresses of one endpoint are fungible (one pod): the first usable is enough.
            for address in endpoint.addresses:
                if endpoint_address_refusal(address, allowed) is None:
                    zoned.add((endpoint.zone, address, port))
                    break

    # An address listed twice (in two slices, or under two zones while a slice is rewritten)
    # is one endpoint; keep it in its first zone so the result does not depend on input order.
    # Sorted by zone, so each zone's endpoints are consecutive.
    seen: set[tuple[str, int]] = set()
    by_zone: dict[str, list[LbEndpoint]] = {}
    for zone, address, port in sorted(zoned):
        if (address, port) not in seen:
            seen.add((address, port))
            if (endpoints := by_zone.get(zone)) is None:
                endpoints = by_zone[zone] = []
            endpoints.append(LbEndpoint(address, port))
    # Weight by size so every endpoint gets an even share across zones.
    localities = tuple(
        Locality(zone=zone, endpoints=tuple(endpoints), weight=len(endpoints))
        for zone, endpoints in by_zone.items()
    )
    return LoadAssignment(cluster=cluster.name, localities=localities)


def refresh_load_assignments(
    dag: Dag, store: Store, previous: Store | None = None, allowed: Sequence[Network] = ()
) -> Dag:
    """The EDS fast path: new load assignments from the store's slices (the proxyless
    Service targets' too), the rest of `dag` kept.

    Given the `previous` store the DAG was built from, only the Services whose slices changed
    are recomputed; every other LoadAssignment stays the same object, which lets the
    translation reuse its serialized resource without comparing anything.
    """
    changed = None if previous is None else _services_with_changed_slices(previous, store)
    if changed is not None and not changed:
        return dag
    slices = slices_by_service(store, changed)
    deferred = dag.deferred_targets

    def refreshed_targets() -> ServiceTargets:
        targets = deferred.value
        assignments = _refreshed(
            targets.clusters, targets.load_assignments, slices, changed, allowed
        )
        return dataclasses.replace(targets, load_assignments=assignments)

    return dataclasses.replace(
        dag,
        load_assignments=_refreshed(dag.clusters, dag.load_assignments, slices, changed, allowed),
        problems=with_slice_problems(dag.problems, store.endpoint_slices.values(), allowed),
        deferred_targets=Deferred(refreshed_targets),
    )


def _refreshed(
    clusters: Mapping[str, Cluster],
    assignments: Mapping[str, LoadAssignment],
    slices: Mapping[NamespacedName, list[EndpointSlice]],
    changed: Container[NamespacedName] | None,
    allowed: Sequence[Network],
) -> dict[str, LoadAssignment]:
    """`assignments` with those of the EDS clusters of `changed` Services (None: every one)
    made again from `slices`. (Checked external names' come from the DNS check.)"""
    refreshed = dict(assignments)
    for name, cluster in clusters.items():
        if isinstance(cluster, EdsCluster):
            service = _service_of(cluster)
            if changed is None or service in changed:
                refreshed[name] = load_assignment(cluster, slices.get(service, []), allowed)
    return refreshed


def with_slice_problems(
    problems: Sequence[Problem], slices: Iterable[EndpointSlice], allowed: Sequence[Network] = ()
) -> tuple[Problem, ...]:
    """`problems` with those of EndpointSlices recomputed from `slices` (sorted by object,
    as a build sorts them)."""
    kept = [p for p in problems if p.object.kind != "EndpointSlice"]
    return tuple(sorted([*kept, *slice_problems(slices, allowed)], key=lambda p: p.object))


# A Service's EndpointSlices in name order.
SlicesOf = Callable[[NamespacedName], Sequence[EndpointSlice]]


def updated_load_assignments(
    clusters: Mapping[str, Cluster],
    previous_clusters: Mapping[str, Cluster],
    previous_assignments: Mapping[str, LoadAssignment],
    changed: Container[NamespacedName],
    slices_of: SlicesOf,
    allowed: Sequence[Network] = (),
) -> dict[str, LoadAssignment]:
    """What load_assignments(clusters, store) gives, keeping every previous LoadAssignment
    whose cluster and EndpointSlices did not change (the same object). `changed`: the
    Services whose slices changed; `slices_of`: the store's slices of a Service."""
    kept: dict[str, LoadAssignment] = {}
    wanted: dict[str, EdsCluster] = {}
    for name, cluster in clusters.items():
        if not isinstance(cluster, EdsCluster):
            continue
        before = previous_clusters.get(name)
        assignment = previous_assignments.get(name)
        if (
            assignment is not None
            and (before is cluster or before == cluster)
            and _service_of(cluster) not in changed
        ):
            kept[name] = assignment
        else:
            wanted[name] = cluster
    for name, cluster in wanted.items():
        kept[name] = load_assignment(cluster, slices_of(_service_of(cluster)), allowed)
    return kept


def patched_load_assignments(
    clusters: Mapping[str, Cluster],
    previous_assignments: Mapping[str, LoadAssignment],
    changed_clusters: Iterable[str],
    changed_services: Iterable[NamespacedName],
    eds_clusters_of: Callable[[NamespacedName], Iterable[str]],
    slices_of: SlicesOf,
    allowed: Sequence[Network] = (),
) -> dict[str, LoadAssignment]:
    """What load_assignments(clusters, store) gives, from the previous result and the names
    of the clusters added, removed or changed since: only those, and the EDS clusters of
    Services whose EndpointSlices changed (`eds_clusters_of`: the names of a Service's EDS
    clusters, some perhaps not in `clusters`), are made again."""
    names = set(changed_clusters)
    for service in changed_services:
        names.update(eds_clusters_of(service))
    # (It tells translation which names it put or removed: those alone are looked at.)
    result: dict[str, LoadAssignment] = PatchedDict(previous_assignments)
    for name in names:
        cluster = clusters.get(name)
        if isinstance(cluster, EdsCluster):
            result[name] = load_assignment(cluster, slices_of(_service_of(cluster)), allowed)
        else:
            result.pop(name, None)
    return result


def _services_with_changed_slices(before: Store, after: Store) -> set[NamespacedName]:
    old, new = before.endpoint_slices, after.endpoint_slices
    changed: set[NamespacedName] = set()
    if old is new:
        return changed
    for key in old.keys() | new.keys():
        was, now = old.get(key), new.get(key)
        if was is now or was == now:
            continue
        for endpoint_slice in (was, now):
            if endpoint_slice is not None and endpoint_slice.service_name:
                changed.add((key[0], endpoint_slice.service_name))
    return changed


def load_assignments(
    clusters: Mapping[str, Cluster], store: Store, allowed: Sequence[Network] = ()
) -> dict[str, LoadAssignment]:
    """A load assignment for each EDS cluster, by cluster name."""
    slices = slices_by_service(store)
    return {
        name: load_assignment(cluster, slices.get(_service_of(cluster), []), allowed)
        for name, cluster in sorted(clusters.items())
        if isinstance(cluster, EdsCluster)
    }


def slices_by_service(
    store: Store, services: Container[NamespacedName] | None = None
) -> dict[NamespacedName, list[EndpointSlice]]:
    """Each Service's slices in name order; only those of `services` when given."""
    # One pass over every slice, rather than one per cluster: this runs on each endpoint change.
    by_service: dict[NamespacedName, list[EndpointSlice]] = {}
    for (namespace, _), endpoint_slice in store.endpoint_slices.items():
        if endpoint_slice.service_name:
            key = (namespace, endpoint_slice.service_name)
            if services is None or key in services:
                by_service.setdefault(key, []).append(endpoint_slice)
    for slices in by_service.values():
        slices.sort(key=lambda s: s.meta.name)
    return by_service


def _service_of(cluster: EdsCluster) -> NamespacedName:
    return cluster.service.namespace, cluster.service.name


def checked_clusters(clusters: Mapping[str, Cluster]) -> list[DnsCluster]:
    """The external-name clusters whose endpoints are the DNS check's addresses."""
    return [value for value in _dns_clusters(clusters) if value.checked and not value.addresses]


def _dns_clusters(clusters: Mapping[str, Cluster]) -> list[DnsCluster]:
    found: list[DnsCluster] = []
    for value in clusters.values():
        members = value.children if isinstance(value, AggregateCluster) else (value,)
        found.extend(member for member in members if isinstance(member, DnsCluster))
    return found


def checked_assignments(
    clusters: Mapping[str, Cluster],
    dns: DnsObservations,
    policy: ExternalNamePolicy,
    default_family: str,
) -> dict[str, LoadAssignment]:
    """A load assignment for each external-name cluster dragoman gives its endpoints: its
    externalIPs, or the DNS check's addresses. By cluster name."""
    assignments = {}
    for value in _dns_clusters(clusters):
        found = dns_cluster_assignment(value, dns, policy, default_family)
        if found is not None:
            assignments[value.name] = found
    return assignments


def dns_cluster_assignment(
    value: DnsCluster, dns: DnsObservations, policy: ExternalNamePolicy, default_family: str
) -> LoadAssignment | None:
    """The load assignment of one external-name cluster (see checked_assignments); None when
    Envoy resolves its name itself."""
    if value.addresses:
        # Addresses the Service lists itself: only its own family setting filters them.
        return checked_assignment(value, value.addresses, "ALL")
    if value.checked:
        served = served_addresses(value.hostname, dns.get(value.hostname), policy)
        return checked_assignment(value, served, default_family)
    return None


def checked_assignment(
    cluster: DnsCluster, addresses: Sequence[str], default_family: str
) -> LoadAssignment:
    """The addresses the DNS check accepted for the cluster's name, each an endpoint that keeps
    the name as its hostname (Host rewrite, SNI and certificate checks use it), of the
    Service's lookup family or else `default_family`. No address: no endpoint, and Envoy
    answers 503."""
    chosen = _of_family(addresses, cluster.dns.lookup_family or default_family)
    if not chosen:
        return LoadAssignment(cluster=cluster.name)
    if cluster.dns.logical:
        # One host with every address, raced by Envoy (Happy Eyeballs), as a logical DNS
        # cluster's host is when Envoy resolves the name itself.
        first, *others = chosen
        host = LbEndpoint(first, cluster.port, cluster.hostname, tuple(others))
        return LoadAssignment(cluster=cluster.name, localities=(Locality("", (host,)),))
    endpoints = tuple(LbEndpoint(a, cluster.port, hostname=cluster.hostname) for a in chosen)
    return LoadAssignment(
        cluster=cluster.name, localities=(Locality("", endpoints, weight=len(endpoints)),)
    )


def _of_family(addresses: Sequence[str], family: str | None) -> tuple[str, ...]:
    """The addresses a lookup family lets Envoy use (None or ALL: every one)."""
    v4 = tuple(a for a in addresses if ":" not in a)
    v6 = tuple(a for a in addresses if ":" in a)
    if family == "V4_ONLY":
        return v4
    if family == "V6_ONLY":
        return v6
    if family in ("V4_PREFERRED", "AUTO"):
        return v4 or v6
    if family == "V6_PREFERRED":
        return v6 or v4
    return tuple(addresses)
