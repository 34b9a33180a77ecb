"""The DAG build: a Store in, a Dag out. Pure: no I/O, no clock, no shared state."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from dragoman.dag.context import build_context
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.frontends.attachment import Attachment, attach
from dragoman.dag.frontends.backend_client_certificates import with_client_certificates
from dragoman.dag.frontends.kind_conflicts import AttachedRoute, without_kind_conflicts
from dragoman.dag.frontends.l4_conflicts import without_l4_conflicts
from dragoman.dag.frontends.listeners import Frontends, frontends
from dragoman.dag.model import ALL_GATEWAYS, Cluster, Dag, NodeGroup, Problem
from dragoman.dag.node_groups.groups import ServedRoutes, node_group, shadowed_listeners
from dragoman.dag.node_groups.l4_listeners import ServedL4Route
from dragoman.dag.options import BuildOptions
from dragoman.dag.routes.l4_rules import l4_route_rules
from dragoman.dag.routes.rules import route_rules
from dragoman.dag.status.addresses import with_gateway_addresses
from dragoman.dag.status.objects import object_statuses
from dragoman.dag.status.route_upstreams import (
    RouteUpstreams,
    checked_hostnames,
    dns_routes,
    policy_statuses,
    with_aggregate_children,
    with_dns_conditions,
)
from dragoman.dag.status.routes import RouteOutcome
from dragoman.dag.upstreams.endpoint_addresses import slice_problems
from dragoman.dag.upstreams.endpoints import checked_assignments, load_assignments
from dragoman.dag.upstreams.reachable_backends import NO_BACKEND_NAMES, route_backend_names
from dragoman.dag.upstreams.session_affinity import affinity_timeout_problems
from dragoman.objects import ObjectKey
from dragoman.store import Store


# BuildOptions is frozen, so one shared default instance is safe.
def build(
    store: Store, options: BuildOptions = BuildOptions(), dns: DnsObservations | None = None
) -> Dag:
    """Listeners, route tables and clusters per node group, and every problem found.

    `dns`: what the DNS check last observed per external name (used when options.dns_check).
    """
    problems: list[Problem] = []
    context = build_context(store, options, dns)
    upstream = context.upstream
    upstreams: list[RouteUpstreams] = []
    # dragoman's GatewayClasses and Gateways, each listener judged (TLS, conflicts, kinds).
    judged = frontends(context)
    problems.extend(judged.problems)
    gateways = judged.ordered()

    served: list[ServedRoutes] = []
    outcomes: list[RouteOutcome] = []
    resolved_clusters: dict[str, Cluster] = {}
    routes = [*store.http_routes.values(), *store.grpc_routes.values()]
    routes.sort(key=lambda route: route.key)
    # Of an HTTPRoute and a GRPCRoute sharing hostnames on a listener, one is accepted.
    attached, conflicts = without_kind_conflicts(
        [
            AttachedRoute(route, tuple(attach(route, judged, store.namespaces, store.gateways)))
            for route in routes
        ]
    )
    problems.extend(conflicts)
    for route, item in zip(routes, attached, strict=True):
        parents = item.parents
        outcome = RouteOutcome(route, route.meta.generation, parents)
        outcomes.append(outcome)
        # Only policies and the DNS check need to know what a route reaches.
        names = (
            route_backend_names(route, context)
            if upstream.tls_policies or options.dns_check
            else NO_BACKEND_NAMES
        )
        upstreams.append(RouteUpstreams(outcome, names))
        problems.extend(parent.problem for parent in parents if parent.problem is not None)
        attachments = [attachment for parent in parents for attachment in parent.attachments]
        # Rules are resolved even for an unattached route, so all its problems show at once.
        rules = route_rules(route, context)
        problems.extend(rules.problems)
        resolved_clusters.update(rules.clusters)
        served.extend(
            ServedRoutes(attachment, rules.ranked, route.hostnames) for attachment in attachments
        )

    # TCPRoutes, TLSRoutes and UDPRoutes: whole connections (or datagrams) per listener.
    l4_routes = [*store.tcp_routes.values(), *store.tls_routes.values(), *store.udp_routes.values()]
    l4_routes.sort(key=lambda route: route.key)
    l4_attached, l4_conflicts = without_l4_conflicts(
        [
            AttachedRoute(route, tuple(attach(route, judged, store.namespaces, store.gateways)))
            for route in l4_routes
        ]
    )
    problems.extend(l4_conflicts)
    served_l4: list[ServedL4Route] = []
    for l4_route, item in zip(l4_routes, l4_attached, strict=True):
        parents = item.parents
        outcome = RouteOutcome(l4_route, l4_route.meta.generation, parents)
        outcomes.append(outcome)
        names = (
            route_backend_names(l4_route, context)
            if upstream.tls_policies or options.dns_check
            else NO_BACKEND_NAMES
        )
        upstreams.append(RouteUpstreams(outcome, names))
        problems.extend(parent.problem for parent in parents if parent.problem is not None)
        attachments = [attachment for parent in parents for attachment in parent.attachments]
        l4_rules = l4_route_rules(l4_route, context)
        problems.extend(l4_rules.problems)
        if any(not _terminates(judged, a) for a in attachments if l4_route.kind == "TLSRoute"):
            problems.extend(l4_rules.passthrough_problems)
        resolved_clusters.update(l4_rules.clusters)
        served_l4.extend(ServedL4Route(a, l4_route.key, l4_rules) for a in attachments)

    served_by_gateway: dict[ObjectKey, list[ServedRoutes]] = {}
    # Routes on a ListenerSet's listeners are served with its Gateway's.
    for item in served:
        served_by_gateway.setdefault(judged.owner(item.attachment.gateway), []).append(item)
    l4_by_gateway: dict[ObjectKey, list[ServedL4Route]] = {}
    for l4_item in served_l4:
        owner = judged.owner(l4_item.attachment.gateway)
        l4_by_gateway.setdefault(owner, []).append(l4_item)
    groups: dict[str, NodeGroup] = {}
    for verdict in gateways:
        gateway = verdict.gateway
        name = f"{gateway.meta.namespace}/{gateway.meta.name}"
        groups[name] = node_group(
            name,
            judged.with_children(verdict),
            served_by_gateway.get(gateway.key, []),
            l4_by_gateway.get(gateway.key, []),
        )
    shadowed: dict[tuple[ObjectKey, int], Problem] = {}
    served_gateways = served_by_gateway.keys() | l4_by_gateway.keys()
    if len(gateways) == 1 and not served_gateways - {gateways[0].gateway.key}:
        # One Gateway: every Envoy gets the same configuration; build (and serialize) it once.
        groups[ALL_GATEWAYS] = dataclasses.replace(groups[name], name=ALL_GATEWAYS)
        referenced: Iterable[str] = groups[ALL_GATEWAYS].clusters
    else:
        every = [item for verdict in gateways for item in judged.with_children(verdict)]
        groups[ALL_GATEWAYS] = node_group(ALL_GATEWAYS, every, served, served_l4)
        # Gateways sharing a port: the all-gateways group can serve only one listener per
        # port and hostname, so it may reference fewer clusters than some Gateway's group.
        shadowed = shadowed_listeners(every)
        problems.extend(shadowed.values())
        referenced = sorted({name for group in groups.values() for name in group.clusters})
    groups = {ALL_GATEWAYS: groups.pop(ALL_GATEWAYS), **groups}

    # Only clusters some attached route forwards to, in any group.
    clusters = {name: resolved_clusters[name] for name in referenced}
    if any(verdict.client_certificate is not None for verdict in gateways):
        groups, clusters = with_client_certificates(groups, clusters, gateways)
        # Only clusters some group still references (a variant may replace the original).
        used = {name for group in groups.values() for name in group.clusters}
        clusters = {name: cluster for name, cluster in clusters.items() if name in used}
    groups, clusters = with_aggregate_children(groups, clusters)
    statuses = object_statuses(judged, outcomes, problems, options.controller_name, shadowed)
    problems.extend(with_gateway_addresses(statuses, store, options))
    for status in policy_statuses(upstreams, context):
        statuses[status.key] = status
    problems.extend(affinity_timeout_problems(clusters.values(), store.services))
    assignments = load_assignments(clusters, store, options.endpoint_networks)
    problems.extend(slice_problems(store.endpoint_slices.values(), options.endpoint_networks))
    routes_to_names = dns_routes(upstreams) if options.dns_check else {}
    if options.dns_check:
        policy = options.external_names
        statuses = with_dns_conditions(statuses, routes_to_names, upstream.dns, policy)
    # Checked external names' addresses, and ExternalNames' externalIPs.
    assignments.update(
        checked_assignments(
            clusters, upstream.dns, options.external_names, options.dns_lookup_family
        )
    )
    return Dag(
        groups=groups,
        clusters=clusters,
        load_assignments=assignments,
        # Stable: an object's problems keep the order of its fields.
        problems=tuple(sorted(problems, key=lambda problem: problem.object)),
        statuses=statuses,
        dns_hostnames=checked_hostnames(upstreams) if options.dns_check else (),
        dns_routes=routes_to_names,
    )


def _terminates(judged: Frontends, attachment: Attachment) -> bool:
    """Whether the listener an attachment is on terminates TLS (else: passes it through)."""
    owners = judged.listener_sets if attachment.gateway.kind == "ListenerSet" else judged.gateways
    gateway = owners.get((attachment.gateway.namespace, attachment.gateway.name))
    verdict = gateway.listener(attachment.listener) if gateway is not None else None
    return verdict is not None and verdict.terminates_tls
