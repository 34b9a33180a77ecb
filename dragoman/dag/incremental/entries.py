"""A route's share of the build (its entry): what attach() and its rules made of it, what it
read of the store, and, after kind conflicts, its parents, problems and status."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import DnsObservations, dns_resolved_condition
from dragoman.dag.frontends.attachment import Attachment, ParentOutcome, attach
from dragoman.dag.frontends.listeners import Frontends
from dragoman.dag.incremental.route_reads import RecordingGrants, RecordingServices
from dragoman.dag.model import ObjectStatus, Problem
from dragoman.dag.node_groups.group_index import ServedKey
from dragoman.dag.node_groups.groups import ServedRoutes
from dragoman.dag.node_groups.l4_listeners import ServedL4Route
from dragoman.dag.options import BuildOptions
from dragoman.dag.reference_grants import Referrer, Target
from dragoman.dag.routes.l4_rules import L4Rules, l4_route_rules
from dragoman.dag.routes.rules import RouteRules, route_rules
from dragoman.dag.status.routes import RouteOutcome, add_route_condition, route_status
from dragoman.dag.upstreams.reachable_backends import (
    NO_BACKEND_NAMES,
    RouteBackendNames,
    route_backend_names,
)
from dragoman.objects import GRPCRoute, HTTPRoute, ObjectKey, TCPRoute, TLSRoute, UDPRoute
from dragoman.store import NamespacedName, Store

Route = HTTPRoute | GRPCRoute | TCPRoute | TLSRoute | UDPRoute

# Route kinds in the order of their statuses (see status_order), with their Store fields.
ROUTE_FIELDS = {
    HTTPRoute.kind: "http_routes",
    GRPCRoute.kind: "grpc_routes",
    TLSRoute.kind: "tls_routes",
    TCPRoute.kind: "tcp_routes",
    UDPRoute.kind: "udp_routes",
}
# Those that proxy whole connections or datagrams (whose conflicts l4_conflicts.py decides).
L4_KINDS = frozenset({TCPRoute.kind, TLSRoute.kind, UDPRoute.kind})


def store_route(store: Store, key: ObjectKey) -> Route | None:
    """The route of `key` in `store`, None when it holds none."""
    routes: Mapping[NamespacedName, Route] = getattr(store, ROUTE_FIELDS[key.kind])
    return routes.get((key.namespace, key.name))


def sort_key(key: ObjectKey) -> tuple[str, str, str]:
    """ObjectKey's order, as a tuple compared without calling Python code."""
    return key.kind, key.namespace, key.name


@dataclass(frozen=True, slots=True)
class RouteEntry:
    """One route's share of the build."""

    key: ObjectKey  # the route's
    route: Route
    attached: tuple[ParentOutcome, ...]  # as attach() found them
    rules: RouteRules | L4Rules
    # What it reaches, for BackendTLSPolicy statuses and the DNS check (when either is on).
    names: RouteBackendNames
    # Tuples, not frozensets: a few items each, ten thousand entries, only ever iterated.
    services_read: tuple[NamespacedName, ...] | None  # None: every Service
    # The cross-namespace references it asked ReferenceGrants about.
    grant_questions: tuple[tuple[Referrer, Target], ...]
    # After kind conflicts (see kind_conflicts.py), and what follows from them.
    parents: tuple[ParentOutcome, ...] = ()
    conflicts: tuple[Problem, ...] = ()  # lost listeners of parentRefs that kept some
    problems: tuple[Problem, ...] = ()  # in the build's order: parentRefs', then rules'
    status: ObjectStatus | None = None

    # What follows from the fields above is made when asked, not kept: ten thousand
    # entries would each hold a one-item dict of served items and an outcome (3 MiB).
    @property
    def outcome(self) -> RouteOutcome:
        return RouteOutcome(self.route, self.route.meta.generation, self.parents)

    def served(self) -> Iterator[tuple[ServedKey, ServedRoutes | ServedL4Route]]:
        """The route's items as each listener serves it (after conflicts), by served key:
        the same values on every call."""
        key, rules = self.key, self.rules
        for p, parent in enumerate(self.parents):
            for a, attachment in enumerate(parent.attachments):
                if isinstance(rules, L4Rules):
                    yield (key, p, a), ServedL4Route(attachment, key, rules)
                else:
                    yield (key, p, a), ServedRoutes(attachment, rules.ranked, self.route.hostnames)

    def accepted_on(self) -> set[tuple[ObjectKey, str]]:
        """The (Gateway, listener) pairs that accepted the route (each counts it once)."""
        return {
            (attachment.gateway, attachment.listener)
            for parent in self.parents
            if parent.accepted
            for attachment in parent.attachments
        }


@dataclass(frozen=True, slots=True)
class EntryInputs:
    """What making an entry reads besides its route: the same for every route of a build."""

    store: Store
    context: BuildContext
    judged: Frontends
    options: BuildOptions
    dns: DnsObservations
    with_names: bool  # whether routes record the backends they reach


class Recording:
    """The build context with the Services and ReferenceGrants recording what each route
    reads (restarted for every route)."""

    __slots__ = ("context", "grants", "services")

    def __init__(self, context: BuildContext) -> None:
        self.services = RecordingServices(context.store.services)
        self.grants = RecordingGrants(context.grants)
        store = dataclasses.replace(context.store, services=self.services)
        self.context = dataclasses.replace(context, store=store, grants=self.grants)


def route_entry(
    key: ObjectKey, route: Route, inputs: EntryInputs, recording: Recording | None
) -> RouteEntry:
    """The entry of `route` before conflicts; what it read is recorded when `recording`."""
    store = inputs.store
    parents = tuple(attach(route, inputs.judged, store.namespaces, store.gateways))
    if recording is None:
        context = inputs.context
    else:
        recording.services.restart()
        recording.grants.restart()
        context = recording.context
    rules: RouteRules | L4Rules = (
        l4_route_rules(route, context)  # type: ignore[arg-type]  # an L4 kind, by L4_KINDS
        if route.kind in L4_KINDS
        else route_rules(route, context)  # type: ignore[arg-type]  # HTTP or gRPC, likewise
    )
    names = route_backend_names(route, context) if inputs.with_names else NO_BACKEND_NAMES
    services_read: tuple[NamespacedName, ...] | None = None
    grant_questions: tuple[tuple[Referrer, Target], ...] = ()
    if recording is not None:
        services = recording.services
        services_read = None if services.every else tuple(services.keys_read)
        asked = recording.grants.asked
        grant_questions = tuple(asked) if asked else ()
    return _entry(
        key, route, parents, rules, names, services_read, grant_questions, parents, (), inputs
    )


def with_parents(
    entry: RouteEntry,
    parents: tuple[ParentOutcome, ...],
    conflicts: tuple[Problem, ...],
    inputs: EntryInputs,
) -> RouteEntry:
    """`entry` with these parents (after kind conflicts) and what follows from them."""
    return _entry(
        entry.key,
        entry.route,
        entry.attached,
        entry.rules,
        entry.names,
        entry.services_read,
        entry.grant_questions,
        parents,
        conflicts,
        inputs,
    )


def with_dns_resolved(entry: RouteEntry, inputs: EntryInputs) -> RouteEntry:
    """`entry` (of a route forwarding to external names, with the DNS check on) with its
    DNSResolved conditions made again from `inputs.dns`; the rest as it was."""
    assert entry.status is not None  # every entry made has its status
    options = inputs.options
    resolved = dns_resolved_condition(
        entry.names.hostnames, inputs.dns, entry.route.meta.generation, options.external_names
    )
    return dataclasses.replace(entry, status=add_route_condition(entry.status, resolved))


def _entry(
    key: ObjectKey,
    route: Route,
    attached: tuple[ParentOutcome, ...],
    rules: RouteRules | L4Rules,
    names: RouteBackendNames,
    services_read: tuple[NamespacedName, ...] | None,
    grant_questions: tuple[tuple[Referrer, Target], ...],
    parents: tuple[ParentOutcome, ...],
    conflicts: tuple[Problem, ...],
    inputs: EntryInputs,
) -> RouteEntry:
    """The entry of a route whose parents (after conflicts) are `parents`."""
    refused = [p.problem for p in parents if p.problem is not None]
    problems = (*refused, *rules.problems) if refused else rules.problems
    # A TLSRoute's backends that cannot take a passed-through connection: a problem
    # where some listener passes TLS through.
    if (
        isinstance(rules, L4Rules)
        and rules.passthrough_problems
        and route.kind == TLSRoute.kind
        and any(not _terminates(a, inputs.judged) for parent in parents for a in parent.attachments)
    ):
        problems = (*problems, *rules.passthrough_problems)
    outcome = RouteOutcome(route, route.meta.generation, parents)
    # The build lists every conflict before the routes' own problems.
    own = (
        [problem for problem in (*conflicts, *problems) if problem.object == key]
        if conflicts or problems
        else ()
    )
    options = inputs.options
    status = route_status(outcome, own, options.controller_name)
    if options.dns_check and names.hostnames:
        resolved = dns_resolved_condition(
            names.hostnames, inputs.dns, outcome.generation, options.external_names
        )
        status = add_route_condition(status, resolved)
    return RouteEntry(  # not dataclasses.replace: ten thousand of these in a full build
        key=key,
        route=route,
        attached=attached,
        rules=rules,
        names=names,
        services_read=services_read,
        grant_questions=grant_questions,
        parents=parents,
        conflicts=conflicts,
        problems=problems,
        status=status,
    )


def _terminates(attachment: Attachment, judged: Frontends) -> bool:
    """Whether the listener an attachment is on terminates TLS (else: passes it through)."""
    owners = judged.listener_sets if attachment.gateway.kind == "ListenerSet" else judged.gateways
    gateway = owners.get((attachment.gateway.namespace, attachment.gateway.name))
    verdict = gateway.listener(attachment.listener) if gateway is not None else None
    return verdict is not None and verdict.terminates_tls
