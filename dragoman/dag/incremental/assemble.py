"""The Dag made of a build's parts: the node groups served, the clusters they reference with
their load assignments, every object's status and every problem. Pure: `assemble` reads its
parts (and the previous Dag, whose unchanged values it keeps) and changes none of them."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter

from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.frontends.backend_client_certificates import with_client_certificates
from dragoman.dag.frontends.listeners import Frontends
from dragoman.dag.incremental.entries import ROUTE_FIELDS
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.incremental.served_groups import ServedGroups, unscoped_by_gateway
from dragoman.dag.incremental.slices import SliceIndex
from dragoman.dag.model import (
    ALL_GATEWAYS,
    Cluster,
    Dag,
    DnsCluster,
    LoadAssignment,
    NodeGroup,
    ObjectStatus,
    Problem,
)
from dragoman.dag.options import BuildOptions
from dragoman.dag.patched_mapping import changed_keys_since
from dragoman.dag.status.addresses import with_gateway_addresses
from dragoman.dag.status.credential_injectors import credential_injector_statuses
from dragoman.dag.status.objects import frontend_statuses, status_order
from dragoman.dag.status.route_upstreams import (
    RouteUpstreams,
    policy_statuses,
    with_aggregate_children,
)
from dragoman.dag.status.xbackends import xbackend_statuses
from dragoman.dag.upstreams.endpoint_addresses import slice_problems
from dragoman.dag.upstreams.endpoints import (
    checked_assignments,
    load_assignments,
    patched_load_assignments,
    updated_load_assignments,
)
from dragoman.dag.upstreams.session_affinity import TIMEOUT_FIELD, affinity_timeout_problems
from dragoman.dag.xbackend_traffic_policies import traffic_targets
from dragoman.objects import ObjectKey
from dragoman.store import NamespacedName, Store


@dataclass(frozen=True, slots=True)
class Previous:
    """What the Dag before this one was made of (its store and itself)."""

    store: Store
    dag: Dag
    had_aggregates: bool  # whether some cluster it resolved was an aggregate


@dataclass(frozen=True, slots=True)
class DagParts:
    """Everything a Dag is made of. `previous` None: the first Dag of these parts' kind."""

    store: Store
    options: BuildOptions
    context: BuildContext
    dns: DnsObservations
    judged: Frontends  # the Gateways, GatewayClasses and ListenerSets, judged
    routes: RouteIndex  # every route's entry
    served: ServedGroups
    resolved: Mapping[str, Cluster]  # every cluster some route resolved, by name
    has_aggregates: bool  # whether some cluster resolved is an aggregate
    # Since the previous Dag: the names of the clusters resolved anew, the Services whose
    # EndpointSlices changed, the external names the DNS check observed anew, and the routes
    # whose entries were replaced (None: routes came or went).
    changed_clusters: Collection[str]
    changed_services: Collection[NamespacedName]
    observed: Collection[str]
    replaced: Collection[ObjectKey] | None
    eds_clusters_of: Callable[[NamespacedName], Iterable[str]]
    slices: SliceIndex | None  # EndpointSlices by Service (None: a build never patched)
    previous: Previous | None


def assemble(parts: DagParts) -> Dag:
    """The Dag of `parts`: with the previous Dag's mappings where they are equal (translation
    then skips them at once)."""
    groups, clusters = _served_clusters(parts)
    changed = _changed_clusters(parts, clusters)
    assignments = _load_assignments(parts, clusters, changed)
    previous = parts.previous
    if previous is not None:
        before = previous.dag.clusters
        if changed is not None and not changed:
            clusters = before  # type: ignore[assignment]  # kept, not changed
        # (Mappings compare every value even when they are the same object.)
        elif changed is None and clusters is not before and clusters == before:
            clusters = before  # type: ignore[assignment]  # likewise
        if _same_assignments(assignments, previous.dag.load_assignments):
            assignments = previous.dag.load_assignments  # type: ignore[assignment]  # likewise
    # Statuses first: the Gateways' addresses add problems.
    statuses, address_problems = _statuses(parts)
    return Dag(
        groups=groups,
        clusters=clusters,
        load_assignments=assignments,
        statuses=statuses,
        problems=_problems(parts, clusters, address_problems),
        dns_hostnames=_checked_hostnames(parts.routes) if parts.options.dns_check else (),
        changed_clusters=(
            (id(previous.dag.clusters), frozenset(changed))
            if previous is not None and changed is not None
            else None
        ),
    )


def _changed_clusters(parts: DagParts, clusters: Mapping[str, Cluster]) -> set[str] | None:
    """The names whose cluster is not the previous Dag's (or came or went), when every
    cluster is the one resolved (no aggregate, no variant for a Gateway's client
    certificate): the clusters resolved anew, added or removed. None: not known so."""
    previous = parts.previous
    if (
        previous is None
        or parts.has_aggregates
        or previous.had_aggregates
        or any(verdict.client_certificate is not None for verdict in parts.judged.ordered())
    ):
        return None
    before = previous.dag.clusters
    if clusters is before:
        return set()
    changed = {
        name for name in parts.changed_clusters if clusters.get(name) is not before.get(name)
    }
    if not _same_names(parts):  # (else the same names: none came or went)
        changed.update(clusters.keys() ^ before.keys())
    return changed


def _same_names(parts: DagParts) -> bool:
    """Whether the clusters served are named as the previous Dag's, in the same order: the
    same clusters referenced (the very tuple, kept when alike), each the one resolved (no
    variant for a Gateway's client certificate, no aggregate's children)."""
    previous = parts.previous
    return (
        previous is not None
        and not parts.has_aggregates
        and not previous.had_aggregates
        and ALL_GATEWAYS in previous.dag.groups
        and parts.served.referenced is previous.dag.groups[ALL_GATEWAYS].clusters
        and all(verdict.client_certificate is None for verdict in parts.judged.ordered())
    )


def _served_clusters(parts: DagParts) -> tuple[dict[str, NodeGroup], dict[str, Cluster]]:
    """The groups, and only the clusters some attached route forwards to in any group (with
    the variants Gateway client certificates make and the children of aggregates)."""
    groups = parts.served.groups
    resolved = parts.resolved
    gateways = parts.judged.ordered()
    previous = parts.previous
    if previous is not None and _same_names(parts):
        if not parts.changed_clusters:
            # The very clusters referenced before, none resolved anew (EndpointSlices alone
            # changed): the previous Dag's, not one step per cluster.
            return groups, previous.dag.clusters  # type: ignore[return-value]  # kept
        # Those resolved anew put in a copy of the previous Dag's (same names, same order):
        # not a look-up per cluster.
        kept = dict(previous.dag.clusters)
        for name in parts.changed_clusters:
            if name in kept:
                kept[name] = resolved[name]
        return groups, kept
    referenced = parts.served.referenced
    clusters = dict(zip(referenced, map(resolved.__getitem__, referenced), strict=True))
    if any(verdict.client_certificate is not None for verdict in gateways):
        groups, clusters = with_client_certificates(groups, clusters, gateways)
        # Only clusters some group still references (a variant may replace the original).
        used = {name for group in groups.values() for name in group.clusters}
        clusters = {name: cluster for name, cluster in clusters.items() if name in used}
    if parts.has_aggregates:
        groups, clusters = with_aggregate_children(groups, clusters)
    return groups, clusters


def _load_assignments(
    parts: DagParts, clusters: dict[str, Cluster], changed_clusters: set[str] | None
) -> dict[str, LoadAssignment]:
    """The clusters' load assignments: made again only where a cluster, its Service's
    EndpointSlices or its external name's DNS check observation changed."""
    allowed = parts.options.endpoint_networks
    previous, slices = parts.previous, parts.slices
    checked_from: Mapping[str, Cluster] = clusters
    if previous is None or slices is None:
        assignments = load_assignments(clusters, parts.store, allowed)
    elif parts.has_aggregates or previous.had_aggregates:
        # Children of aggregates are defined beside the clusters resolved: compare all.
        assignments = updated_load_assignments(
            clusters,
            previous.dag.clusters,
            previous.dag.load_assignments,
            parts.changed_services,
            slices.slices,
            allowed,
        )
    else:
        # Every cluster is the one resolved: those resolved anew, added or removed changed.
        changed = set(parts.changed_clusters)
        if changed_clusters is not None:
            changed.update(changed_clusters)
        elif clusters is not previous.dag.clusters:
            changed.update(clusters.keys() ^ previous.dag.clusters.keys())
        assignments = patched_load_assignments(
            clusters,
            previous.dag.load_assignments,
            changed,
            parts.changed_services,
            parts.eds_clusters_of,
            slices.slices,
            allowed,
        )
        # Checked external names' addresses, and ExternalNames' externalIPs: only those of
        # the clusters that changed or whose name the DNS check observed anew (the others
        # are the previous ones, kept above).
        observed = parts.observed
        if observed:
            checked_from = {
                name: cluster
                for name, cluster in clusters.items()
                if name in changed
                or (isinstance(cluster, DnsCluster) and cluster.hostname in observed)
            }
        else:  # (one step per cluster changed, not per cluster: EndpointSlice churn)
            checked_from = {name: clusters[name] for name in sorted(changed) if name in clusters}
    # Checked external names' addresses, and ExternalNames' externalIPs.
    options = parts.options
    assignments.update(
        checked_assignments(
            checked_from, parts.dns, options.external_names, options.dns_lookup_family
        )
    )
    return assignments


def _same_assignments(
    assignments: Mapping[str, LoadAssignment], before: Mapping[str, LoadAssignment]
) -> bool:
    """Whether the two are equal: only the names a patch of `before` put or removed are
    compared when `assignments` is one."""
    names = changed_keys_since(assignments, before)
    if names is None:
        return assignments == before
    return len(assignments) == len(before) and all(
        assignments.get(name, _NONE) == before.get(name, _NONE) for name in names
    )


_NONE = LoadAssignment(cluster="")  # (no cluster has an empty name: stands for a missing one)


def _statuses(parts: DagParts) -> tuple[dict[ObjectKey, ObjectStatus], list[Problem]]:
    """Every object's status, and the problems found in the Gateways' spec.addresses."""
    routes, judged, store = parts.routes, parts.judged, parts.store
    front = sorted(
        frontend_statuses(
            judged, routes.accepted, parts.served.shadowed, unscoped_by_gateway(parts.served)
        ),
        key=status_order,
    )
    # Gateway addresses may follow a Service's load balancer: made again every time.
    with_addresses = {status.key: status for status in front}
    address_problems = with_gateway_addresses(with_addresses, store, parts.options)
    front = list(with_addresses.values())
    policies = store.backend_tls_policies
    made = policy_statuses(_policy_upstreams(parts), parts.context) if policies else []
    if store.backend_policies:  # judged once per build (context.upstream), cheap to state
        judged_policies = parts.context.upstream.backend_policies
        made.extend(judged_policies.statuses(store.services, parts.options.controller_name))
    if store.xbackend_traffic_policies:
        traffic = parts.context.upstream.traffic_policies
        made.extend(
            traffic.statuses(
                traffic_targets(store),
                parts.options.controller_name,
                parts.context.upstream.backend_policies,
            )
        )
    previous, replaced = parts.previous, parts.replaced
    entries = routes.entries
    if store.xbackends:
        made = [*made, *xbackend_statuses(_xbackend_upstreams(parts), parts.context)]
    injectors = credential_injector_statuses(parts.context) if store.credential_injectors else []
    others = (*front, *made, *injectors)
    statuses: dict[ObjectKey, ObjectStatus]
    if (
        replaced is not None
        and previous is not None
        and previous.dag.statuses
        and previous.store.backend_tls_policies.keys() == policies.keys()
        and previous.store.backend_policies.keys() == store.backend_policies.keys()
        and previous.store.xbackend_traffic_policies.keys()
        == store.xbackend_traffic_policies.keys()
    ):
        earlier = previous.dag.statuses
        if not replaced and all(earlier.get(status.key) == status for status in others):
            # No route replaced and the others as they were (EndpointSlices alone changed):
            # the previous statuses, not a copy of ten thousand.
            return earlier, address_problems  # type: ignore[return-value]  # kept, not changed
        # The same objects in the same order: the previous statuses with the changed ones
        # replaced keep the build's order without sorting ten thousand keys again.
        statuses = dict(earlier)
        for key in replaced:
            statuses[key] = entries[key].status  # type: ignore[assignment]  # set by with_parents
    else:
        statuses = {status.key: status for status in front}
        for kind in ROUTE_FIELDS:  # in status_order's order of kinds
            for key in routes.keys(kind):
                statuses[key] = entries[key].status  # type: ignore[assignment]  # likewise
    for status in others:
        statuses[status.key] = status
    return statuses, address_problems


def _xbackend_upstreams(parts: DagParts) -> list[RouteUpstreams]:
    """The routes that name some XBackend (builds with XBackends are full: every entry has
    its names)."""
    entries = parts.routes.entries
    return [
        RouteUpstreams(entries[key].outcome, entries[key].names)
        for key in sorted(entries)
        if entries[key].names.xbackends
    ]


def _policy_upstreams(parts: DagParts) -> list[RouteUpstreams]:
    """The routes that may reach a Service some BackendTLSPolicy targets: the only ones
    policy_statuses finds anything in."""
    routes = parts.routes
    # (Unindexed, what each route read is unknown: every route may.)
    candidates = set(routes.readers_of_all if routes.indexed else routes.entries)
    for policy in parts.store.backend_tls_policies.values():
        for ref in policy.target_refs:
            candidates.update(routes.readers((policy.meta.namespace, ref.name)))
    entries = routes.entries
    return [RouteUpstreams(entries[key].outcome, entries[key].names) for key in sorted(candidates)]


def _problems(
    parts: DagParts, clusters: Mapping[str, Cluster], address_problems: list[Problem]
) -> tuple[Problem, ...]:
    routes = parts.routes
    problems = list(parts.judged.problems)
    entries = routes.entries
    # In the build's order, by key.
    for key in sorted(routes.conflicted):  # (ObjectKeys are tuples: sorted in C)
        problems.extend(entries[key].conflicts)
    problems.extend(routes.problems())
    problems.extend(parts.served.shadowed.values())
    problems.extend(p for found in unscoped_by_gateway(parts.served).values() for p in found)
    problems.extend(address_problems)
    # EndpointSlice addresses dropped, affinity timeouts Envoy cannot honour.
    slices = parts.slices
    problems.extend(
        slices.problems()
        if slices is not None
        else slice_problems(parts.store.endpoint_slices.values(), parts.options.endpoint_networks)
    )
    problems.extend(_affinity_problems(parts, clusters))
    if parts.store.backend_policies:
        policies = parts.context.upstream.backend_policies
        problems.extend(policies.problems(parts.store.services))
    if parts.store.xbackend_traffic_policies:
        upstream = parts.context.upstream
        problems.extend(
            upstream.traffic_policies.problems(
                traffic_targets(parts.store), upstream.backend_policies
            )
        )
    # Stable: an object's problems keep the order of its fields.
    return tuple(sorted(problems, key=_problem_object))


def _affinity_problems(parts: DagParts, clusters: Mapping[str, Cluster]) -> list[Problem]:
    """Affinity timeouts Envoy cannot honour: the previous Dag's when its clusters and
    Services are these (EndpointSlices alone changed), not one step per cluster."""
    previous, services = parts.previous, parts.store.services
    if (
        previous is not None
        and clusters is previous.dag.clusters
        and services is previous.store.services
    ):
        # (Problems are in object order: a Service's are among the Services', not all.)
        problems = previous.dag.problems
        first = bisect_left(problems, _SERVICES, key=_problem_object)
        end = bisect_left(problems, _AFTER_SERVICES, key=_problem_object)
        return [problem for problem in problems[first:end] if problem.field == TIMEOUT_FIELD]
    return affinity_timeout_problems(clusters.values(), services)


# Every Service's ObjectKey is between these two (the kind first, then any name).
_SERVICES = ObjectKey("Service", "", "")
_AFTER_SERVICES = ObjectKey("Service\0", "", "")


# A problem's object: its place in the build's order (a tuple, compared in C).
_problem_object = attrgetter("object")


def _checked_hostnames(routes: RouteIndex) -> tuple[str, ...]:
    """The external names of routes attached somewhere: what the DNS check resolves."""
    entries = routes.entries
    return tuple(
        sorted({name for key in routes.with_hostnames for name in entries[key].names.hostnames})
    )
