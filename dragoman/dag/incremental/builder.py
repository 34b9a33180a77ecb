"""The build, from a store to a Dag: the one place its steps are ordered. A full build
(`full_build`, which `dag.build.build` is) feeds every route to an empty state; later builds
feed it only the routes a change reaches, and the result is the same Dag.

Every route (HTTP, gRPC, TCP, TLS, UDP) is an entry: its parent outcomes, rules, problems,
status and served items, with what it read (the Services and the namespaces of the
ReferenceGrants it consulted). A change to routes, Services, EndpointSlices,
ReferenceGrants or Secrets recomputes the entries it reaches and feeds their served items
to each node group's index, which rebuilds only the virtual hosts (or TCP, TLS and UDP
listeners) those items reach; everything else is the previous Dag's objects.

A change to Gateways, GatewayClasses, ListenerSets or Namespaces is a full build, and so is
one to a Secret or ReferenceGrant that changes how a Gateway listener is judged: they reach
every route. So are stores with ListenerSets or Gateway client certificates, and the
appearance of the first BackendTLSPolicy or the removal of the last (from then on every
route records the backends it reaches).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dragoman.dag.context import BuildContext, build_context
from dragoman.dag.dns_check import DnsObservations, dns_resolved_condition
from dragoman.dag.frontends.attachment import Attachment, ParentOutcome, attach
from dragoman.dag.frontends.backend_client_certificates import with_client_certificates
from dragoman.dag.frontends.kind_conflicts import AttachedRoute, without_kind_conflicts
from dragoman.dag.frontends.l4_conflicts import without_l4_conflicts
from dragoman.dag.frontends.listeners import Frontends, frontends
from dragoman.dag.incremental.changes import StoreChanges, store_changes
from dragoman.dag.incremental.reads import RecordingGrants, RecordingServices
from dragoman.dag.incremental.slices import SliceIndex
from dragoman.dag.key_index import Held, add_key, keys_at, remove_key
from dragoman.dag.model import (
    ALL_GATEWAYS,
    AggregateCluster,
    Cluster,
    Dag,
    DnsCluster,
    EdsCluster,
    NodeGroup,
    ObjectStatus,
    Problem,
)
from dragoman.dag.node_groups.group_index import NodeGroupIndex, ServedKey
from dragoman.dag.node_groups.groups import ServedRoutes, node_group, shadowed_listeners
from dragoman.dag.node_groups.l4_listeners import ServedL4Route
from dragoman.dag.options import BuildOptions
from dragoman.dag.reference_grants import ReferenceGrants, Referrer, Target
from dragoman.dag.routes.l4_rules import L4Rules, l4_route_rules
from dragoman.dag.routes.rules import RouteRules, route_rules
from dragoman.dag.status.addresses import with_gateway_addresses
from dragoman.dag.status.objects import frontend_statuses, status_order
from dragoman.dag.status.route_upstreams import (
    RouteUpstreams,
    policy_statuses,
    with_aggregate_children,
)
from dragoman.dag.status.routes import RouteOutcome, add_route_condition, route_status
from dragoman.dag.upstreams.endpoint_addresses import slice_problems
from dragoman.dag.upstreams.endpoints import (
    checked_assignments,
    load_assignments,
    patched_load_assignments,
    updated_load_assignments,
)
from dragoman.dag.upstreams.reachable_backends import (
    NO_BACKEND_NAMES,
    RouteBackendNames,
    route_backend_names,
)
from dragoman.dag.upstreams.session_affinity import affinity_timeout_problems
from dragoman.objects import GRPCRoute, HTTPRoute, ObjectKey, TCPRoute, TLSRoute, UDPRoute
from dragoman.store import NamespacedName, Store

Route = HTTPRoute | GRPCRoute | TCPRoute | TLSRoute | UDPRoute
_K = TypeVar("_K")

# Route kinds in the order of their statuses (see status_order), with their Store fields.
_ROUTE_FIELDS = {
    HTTPRoute.kind: "http_routes",
    GRPCRoute.kind: "grpc_routes",
    TLSRoute.kind: "tls_routes",
    TCPRoute.kind: "tcp_routes",
    UDPRoute.kind: "udp_routes",
}
# Those that proxy whole connections or datagrams (whose conflicts l4_conflicts.py decides).
_L4_KINDS = frozenset({TCPRoute.kind, TLSRoute.kind, UDPRoute.kind})
# Store fields whose changes an entry-by-entry update handles; any other change (Gateways,
# GatewayClasses, ListenerSets, Namespaces) is a full build.
_PATCHABLE_FIELDS = frozenset(
    {
        "services",
        "endpoint_slices",
        "reference_grants",
        "secrets",
        "config_maps",
        "backend_tls_policies",
        *_ROUTE_FIELDS.values(),
    }
)


@dataclass(frozen=True, slots=True)
class BuildResult:
    dag: Dag
    kind: str  # "full", "incremental", "endpoints" (only EndpointSlices changed) or "unchanged"


def full_build(store: Store, options: BuildOptions, dns: DnsObservations | None = None) -> Dag:
    """Listeners, route tables and clusters per node group, and every problem found.

    `dns`: what the DNS check last observed per external name (used when options.dns_check).
    The same steps as an incremental build's, without the indexes a later change would need.
    """
    return _State.made(store, options, dict(dns or {}), indexed=False).dag


class IncrementalBuild:
    """Builds Dags for successive stores, each from what changed since the previous one."""

    def __init__(self, options: BuildOptions = BuildOptions()) -> None:
        self.options = options
        self._state: _State | None = None
        self._store: Store | None = None
        self._dag: Dag | None = None
        self._dns: DnsObservations = {}

    @property
    def dag(self) -> Dag | None:
        return self._dag

    def build(self, store: Store, dns: DnsObservations | None = None) -> BuildResult:
        """The Dag of `store` with `dns` (the DNS check's observations)."""
        dns = dict(dns or {})
        previous, state = self._store, self._state
        if previous is not None and self._dag is not None:
            changes = store_changes(previous, store)
            if not _reads_config_maps(previous) and not _reads_config_maps(store):
                changes.pop("config_maps", None)  # read only for CA certificates
            observed = {n for n in dns.keys() | self._dns.keys() if dns.get(n) != self._dns.get(n)}
            if not changes and not observed:
                return self._keep(store, dns, self._dag, "unchanged")
            dag = state.patch(store, changes, dns, observed) if state is not None else None
            if dag is not None:
                only_slices = changes.keys() == {"endpoint_slices"} and not observed
                return self._keep(store, dns, dag, "endpoints" if only_slices else "incremental")
        self._state = _State.made(store, self.options, dns)
        return self._keep(store, dns, self._state.dag, "full")

    def _keep(self, store: Store, dns: DnsObservations, dag: Dag, kind: str) -> BuildResult:
        self._store, self._dns, self._dag = store, dns, dag
        return BuildResult(dag, kind)


@dataclass(frozen=True, slots=True)
class _Entry:
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


class _State:
    """What a patchable store's Dag is made of, and the indexes from objects to it."""

    def __init__(
        self,
        store: Store,
        options: BuildOptions,
        dns: DnsObservations,
        context: BuildContext,
        judged: Frontends,
        indexed: bool = True,
    ) -> None:
        self.store, self.options, self.dns, self.judged = store, options, dns, judged
        # False: built once, never patched; what only a patch reads is not kept (what each
        # route read, node group indexes: groups are made from the routes served).
        self.indexed = indexed
        self.with_names = _needs_names(store, options)
        self.context = context
        # Whether changes other than to Gateways can be patched (see _patchable).
        self.patchable = _patchable(store, judged)
        self.entries: dict[ObjectKey, _Entry] = {}
        # Route keys of each kind, by key.
        self.keys: dict[str, list[ObjectKey]] = {kind: [] for kind in _ROUTE_FIELDS}
        self.bulk = False  # within an update of many routes (see update)
        # Routes by the Service they read, external name they forward to, namespace of the
        # ReferenceGrants they asked, cluster they define (see key_index).
        self.readers: dict[NamespacedName, Held[ObjectKey]] = {}
        self.readers_of_all: set[ObjectKey] = set()
        self.grant_readers: dict[str, Held[ObjectKey]] = {}
        # Per (Gateway, listener): the route kinds attached and the routes, before conflicts.
        self.listener_kinds: dict[tuple[ObjectKey, str], Counter[str]] = {}
        self.listener_routes: dict[tuple[ObjectKey, str], set[ObjectKey]] = {}
        # The same of TCPRoutes, TLSRoutes and UDPRoutes.
        self.l4_listener_routes: dict[tuple[ObjectKey, str], set[ObjectKey]] = {}
        # TCPRoutes, TLSRoutes and UDPRoutes: their conflicts are decided among them all.
        self.l4_keys: set[ObjectKey] = set()
        # Routes whose parents kind conflicts changed, and routes with problems.
        self.conflicted: set[ObjectKey] = set()
        self.with_problems: set[ObjectKey] = set()
        # Routes attached somewhere that forward to external names (for the DNS check), and
        # the routes forwarding to each external name (attached or not).
        self.with_hostnames: set[ObjectKey] = set()
        self.hostname_readers: dict[str, Held[ObjectKey]] = {}
        # Names of resolved clusters that are aggregates (now, and at the last Dag), and of
        # those resolved anew since the last Dag.
        self.aggregates: set[str] = set()
        self.had_aggregates = False
        self.changed_resolved: set[str] = set()
        # Routes whose entries the last update replaced; None when routes came or went.
        self.replaced: set[ObjectKey] | None = None
        # What with_gateway_addresses found in the Gateways' spec.addresses.
        self.address_problems: list[Problem] = []
        # EndpointSlice addresses dropped, affinity timeouts Envoy cannot honour.
        self.upstream_problems: list[Problem] = []
        # Per Gateway and listener: how many routes it accepted (after conflicts).
        self.attached: dict[ObjectKey, dict[str, int]] = {}
        # (Each cluster is the one of the entry's rules.clusters.)
        self.cluster_sources: dict[str, Held[ObjectKey]] = {}
        # The names of the EDS clusters resolved for each Service.
        self.eds_clusters: dict[NamespacedName, set[str]] = {}
        # EndpointSlices by Service, and the Services whose slices the last change changed.
        self.slices = SliceIndex(
            store.endpoint_slices if indexed else {}, options.endpoint_networks
        )
        self.changed_services: set[NamespacedName] = set()
        # The names whose DNS check observation the last change changed.
        self.observed: set[str] = set()
        # Clusters whose sources changed in this update: resolved once at its end.
        self.unresolved: set[str] = set()
        self.resolved: dict[str, Cluster] = {}
        gateways = judged.ordered()
        self.indexes: dict[str, NodeGroupIndex] = {
            _group_name(verdict.gateway.key): NodeGroupIndex(
                _group_name(verdict.gateway.key), judged.with_children(verdict)
            )
            for verdict in (gateways if indexed else ())
        }
        # One Gateway: every Envoy gets the same configuration; built (and serialized) once.
        # (Unless a ListenerSet's routes are served with no Gateway: see _dag.)
        self.single = len(gateways) == 1
        # Gateways sharing a port: the all-gateways group can serve only one listener per
        # port and hostname, so it may reference fewer clusters than some Gateway's group.
        self.every_shadowed: dict[tuple[ObjectKey, int], Problem] = {}
        if not self.single or judged.listener_sets:
            every = [item for verdict in gateways for item in judged.with_children(verdict)]
            if indexed:
                self.indexes[ALL_GATEWAYS] = NodeGroupIndex(ALL_GATEWAYS, every)
            self.every_shadowed = shadowed_listeners(every)
        self.shadowed: dict[tuple[ObjectKey, int], Problem] = (
            {} if self.single else self.every_shadowed
        )
        self.copied: tuple[NodeGroup, NodeGroup] | None = None
        self.dag: Dag = Dag()

    @classmethod
    def made(
        cls, store: Store, options: BuildOptions, dns: DnsObservations, indexed: bool = True
    ) -> _State:
        """A full build: the state of `store` fed every route."""
        context = build_context(store, options, dns)
        # dragoman's GatewayClasses and Gateways, each listener judged (TLS, conflicts, kinds).
        judged = frontends(context)
        state = cls(store, options, dns, context, judged, indexed)
        every: dict[ObjectKey, Route | None] = {}
        for name in _ROUTE_FIELDS.values():
            routes: Mapping[NamespacedName, Route] = getattr(store, name)
            every.update((route.key, route) for route in routes.values())
        state.update(store, context, every, previous_store=None)
        return state

    def patch(
        self,
        store: Store,
        changes: StoreChanges,
        dns: DnsObservations | None = None,
        observed: Iterable[str] = (),
    ) -> Dag | None:
        """The Dag after `changes` (from the state's store to `store`) and new DNS check
        observations `dns` (`observed`: the names whose observation changed); None when the
        change needs a full build."""
        if (
            not self.patchable
            or changes.keys() - _PATCHABLE_FIELDS
            or _needs_names(store, self.options) != self.with_names
        ):
            return None
        affected: set[ObjectKey] = set()
        if dns is not None:
            # What the DNS check saw of a name reaches the routes that forward to it: their
            # clusters (refused or not) and their DNSResolved condition.
            self.dns = dns
            self.observed = set(observed)
            for name in observed:
                affected.update(keys_at(self.hostname_readers, name))
        context = build_context(store, self.options, self.dns)
        self.changed_services = self.slices.update(
            self.store.endpoint_slices, store.endpoint_slices, changes.get("endpoint_slices", ())
        )
        if changes.keys() & {"reference_grants", "secrets"}:
            # Listeners read both (certificateRefs). New certificates alone (a rotation)
            # change only the HTTPS listeners; a listener judged otherwise reaches every route.
            judged = frontends(context)
            if judged != self.judged:
                if _without_certificates(judged) != _without_certificates(self.judged):
                    return None
                if not _patchable(store, judged):
                    return None
                self.judged = judged
                for name, index in self.indexes.items():
                    index.rejudged(
                        [item for v in judged.ordered() for item in judged.with_children(v)]
                        if name == ALL_GATEWAYS
                        else judged.with_children(judged.gateways[_gateway_of(name)])
                    )
        for kind, name in _ROUTE_FIELDS.items():
            affected.update(ObjectKey(kind, *key) for key in changes.get(name, ()))
        if "services" in changes:
            affected.update(self.readers_of_all)
            for key in changes["services"]:
                affected.update(keys_at(self.readers, key))
        if "reference_grants" in changes:
            affected.update(self._grant_readers(store, changes["reference_grants"]))
        if changes.keys() & {"backend_tls_policies", "config_maps", "secrets"} and self.with_names:
            # Policies (and the CA certificates they name) shape the clusters of the Services
            # they target: every route reading one of those, before or after.
            for policy in (
                *self.store.backend_tls_policies.values(),
                *store.backend_tls_policies.values(),
            ):
                for ref in policy.target_refs:
                    affected.update(keys_at(self.readers, (policy.meta.namespace, ref.name)))
        routes = {key: _route(store, key) for key in affected}
        return self.update(store, context, routes, previous_store=self.store)

    def _grant_readers(
        self, store: Store, changed: frozenset[NamespacedName]
    ) -> Iterator[ObjectKey]:
        """Routes with a question one of the changed grants permits, before or after: a grant
        only adds permissions, so no other answer can change."""
        versions = [
            grant
            for key in changed
            for grant in (self.store.reference_grants.get(key), store.reference_grants.get(key))
            if grant is not None
        ]
        changed_grants = ReferenceGrants(versions)
        for namespace in {namespace for namespace, _ in changed}:
            for route in keys_at(self.grant_readers, namespace):
                questions = self.entries[route].grant_questions
                if any(changed_grants.permits(r, t) for r, t in questions):
                    yield route

    def update(
        self,
        store: Store,
        context: BuildContext,
        routes: Mapping[ObjectKey, Route | None],
        previous_store: Store | None,
    ) -> Dag:
        """Replace the entries of `routes` (None: deleted) and make the Dag."""
        previous_dag = self.dag
        self.store, self.context = store, context
        # Routes whose entries were replaced; None when routes came or went.
        replaced: set[ObjectKey] | None = set()
        removed: dict[ServedKey, ServedRoutes | ServedL4Route] = {}
        added: dict[ServedKey, ServedRoutes | ServedL4Route] = {}
        recording = self._recording()
        # Many routes (a full build): their keys are sorted once, not inserted one by one.
        # (No other step depends on the order routes are fed in: indexes sort what they keep.)
        self.bulk = len(routes) > _BULK
        if not self.entries:
            # A full build: nothing to forget or replace, nothing in the indexes yet.
            entry_of, remember = self._entry, self._remember
            for key, route in routes.items():
                if route is not None:
                    entry = entry_of(key, route, recording)
                    remember(entry)
                    if self.indexed:
                        added.update(entry.served())
            routes = {}
            replaced = None
        for key in routes:
            old = self.entries.get(key)
            if old is not None:
                self._forget(old)
                removed.update(old.served())
            route = routes[key]
            if route is not None:
                entry = self._entry(key, route, recording)
                self._remember(entry)
                added.update(entry.served())
            if replaced is not None and old is not None and route is not None:
                replaced.add(key)
            elif old is not None or route is not None:
                replaced = None
        if self.bulk:
            by_kind: dict[str, list[ObjectKey]] = {kind: [] for kind in self.keys}
            for key in self.entries:
                by_kind[key.kind].append(key)
            for keys in by_kind.values():
                keys.sort(key=_sort_key)
            self.keys = by_kind
            self.bulk = False
        for old, entry in self._conflicts():
            self._forget(old)
            for served, item in old.served():
                # Placed by this update (not yet in the indexes), or by an earlier one.
                if added.pop(served, None) is None:
                    removed[served] = item
            self._remember(entry)
            added.update(entry.served())
            if replaced is not None:
                replaced.add(entry.key)
        self._resolve(self.unresolved)
        self.unresolved.clear()
        # (The Gateways and classes are those of the previous Dag: patch judged them alike.)
        self.replaced = replaced if previous_dag.statuses else None
        for index in self.indexes.values():
            index.update(removed, added)
        self.dag = self._dag(store, previous_store, previous_dag)
        return self.dag

    def _conflicts(self) -> list[tuple[_Entry, _Entry]]:
        """(entry, replacement) for the routes whose parents conflicts change: HTTPRoutes and
        GRPCRoutes on a listener with both kinds (see kind_conflicts.py), TCPRoutes,
        TLSRoutes and UDPRoutes on a listener with several (l4_conflicts.py), and those
        that were. A route alone on its listeners keeps them: the others decide alike."""
        http = [
            keys
            for listener, keys in self.listener_routes.items()
            if len(self.listener_kinds[listener]) > 1
        ]
        l4 = [keys for keys in self.l4_listener_routes.values() if len(keys) > 1]
        conflicted = self.conflicted
        l4_conflicted = {key for key in conflicted if key.kind in _L4_KINDS}
        return [
            *self._decided(http, conflicted - l4_conflicted, without_kind_conflicts),
            *self._decided(l4, l4_conflicted, without_l4_conflicts),
        ]

    def _decided(
        self,
        shared: list[set[ObjectKey]],
        conflicted: set[ObjectKey],
        decide: Callable[[Sequence[AttachedRoute]], tuple[list[AttachedRoute], list[Problem]]],
    ) -> list[tuple[_Entry, _Entry]]:
        involved = sorted(set().union(*shared)) if shared else []
        entries = self.entries
        kept, conflicts = (
            decide([AttachedRoute(entries[key].route, entries[key].attached) for key in involved])
            if involved
            else ([], [])
        )
        changed = []
        by_route: dict[ObjectKey, list[Problem]] = {}
        for problem in conflicts:
            by_route.setdefault(problem.object, []).append(problem)
        outcomes = {key: item.parents for key, item in zip(involved, kept, strict=True)}
        for key in sorted(conflicted | outcomes.keys()):
            entry = entries[key]
            parents = outcomes.get(key, entry.attached)
            lost = tuple(by_route.get(key, ()))
            if parents != entry.parents or lost != entry.conflicts:
                changed.append((entry, self._placed(entry, parents, lost)))
        return changed

    def _entry(self, key: ObjectKey, route: Route, recording: _Recording | None) -> _Entry:
        store = self.store
        parents = tuple(attach(route, self.judged, store.namespaces, store.gateways))
        if recording is None:
            services, grants, context = None, None, self.context
        else:
            services, grants, context = recording
            services.restart()
            grants.restart()
        rules: RouteRules | L4Rules = (
            l4_route_rules(route, context)
            if route.kind in _L4_KINDS
            else route_rules(route, context)  # type: ignore[arg-type]
        )
        names = route_backend_names(route, context) if self.with_names else NO_BACKEND_NAMES
        return self._made(
            key,
            route,
            parents,
            rules,
            names,
            None if services is None or services.every else tuple(services.keys_read),
            tuple(grants.asked) if grants is not None and grants.asked else (),
            parents,
            (),
        )

    def _terminates(self, attachment: Attachment) -> bool:
        """Whether the listener an attachment is on terminates TLS (else: passes it through)."""
        judged = self.judged
        owners = (
            judged.listener_sets if attachment.gateway.kind == "ListenerSet" else judged.gateways
        )
        gateway = owners.get((attachment.gateway.namespace, attachment.gateway.name))
        verdict = gateway.listener(attachment.listener) if gateway is not None else None
        return verdict is not None and verdict.terminates_tls

    def _recording(self) -> _Recording | None:
        """The build context with the Services and ReferenceGrants recording what is read."""
        if not self.indexed:
            return None
        services = RecordingServices(self.store.services)
        grants = RecordingGrants(self.context.grants)
        store = dataclasses.replace(self.store, services=services)
        return services, grants, dataclasses.replace(self.context, store=store, grants=grants)

    def _placed(
        self, entry: _Entry, parents: tuple[ParentOutcome, ...], conflicts: tuple[Problem, ...]
    ) -> _Entry:
        """`entry` with these parents (after kind conflicts) and what follows from them."""
        return self._made(
            entry.key,
            entry.route,
            entry.attached,
            entry.rules,
            entry.names,
            entry.services_read,
            entry.grant_questions,
            parents,
            conflicts,
        )

    def _made(
        self,
        key: ObjectKey,
        route: Route,
        attached: tuple[ParentOutcome, ...],
        rules: RouteRules | L4Rules,
        names: RouteBackendNames,
        services_read: tuple[NamespacedName, ...] | None,
        grant_questions: tuple[tuple[Referrer, Target], ...],
        parents: tuple[ParentOutcome, ...],
        conflicts: tuple[Problem, ...],
    ) -> _Entry:
        """The entry of a route whose parents (after conflicts) are `parents`."""
        refused = [p.problem for p in parents if p.problem is not None]
        problems = (*refused, *rules.problems) if refused else rules.problems
        # A TLSRoute's backends that cannot take a passed-through connection: a problem
        # where some listener passes TLS through.
        if (
            isinstance(rules, L4Rules)
            and rules.passthrough_problems
            and route.kind == TLSRoute.kind
            and any(not self._terminates(a) for parent in parents for a in parent.attachments)
        ):
            problems = (*problems, *rules.passthrough_problems)
        outcome = RouteOutcome(route, route.meta.generation, parents)
        # The build lists every conflict before the routes' own problems.
        own = (
            [problem for problem in (*conflicts, *problems) if problem.object == key]
            if conflicts or problems
            else ()
        )
        status = route_status(outcome, own, self.options.controller_name)
        if self.options.dns_check and names.hostnames:
            resolved = dns_resolved_condition(
                names.hostnames, self.dns, outcome.generation, self.options.external_names
            )
            status = add_route_condition(status, resolved)
        return _Entry(  # not dataclasses.replace: ten thousand of these in a full build
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

    def _remember(self, entry: _Entry) -> None:
        key = entry.key
        self.entries[key] = entry
        if not self.bulk:
            bisect.insort(self.keys[key.kind], key, key=_sort_key)
        if entry.parents != entry.attached or entry.conflicts:
            self.conflicted.add(key)
        if entry.problems:
            self.with_problems.add(key)
        if entry.names.hostnames:
            if any(parent.attachments for parent in entry.parents):
                self.with_hostnames.add(key)
            if self.indexed:
                for name in entry.names.hostnames:
                    add_key(self.hostname_readers, name, key)
        # No setdefault(k, set()) below: ten thousand routes would allocate (and drop) a
        # default each time, a Counter's in Python.
        if not self.indexed:
            pass  # what each route read matters to a later change only
        elif entry.services_read is None:
            self.readers_of_all.add(key)
        else:
            readers = self.readers
            for service in entry.services_read:
                add_key(readers, service, key)
        for _, target in entry.grant_questions:
            add_key(self.grant_readers, target.namespace, key)
        sources, unresolved = self.cluster_sources, self.unresolved
        for name in entry.rules.clusters:
            add_key(sources, name, key)
            unresolved.add(name)
        l4 = key.kind in _L4_KINDS
        if l4:
            self.l4_keys.add(key)
        for parent in entry.attached:
            for attachment in parent.attachments:
                listener = (attachment.gateway, attachment.listener)
                if l4:
                    self.l4_listener_routes.setdefault(listener, set()).add(key)
                    continue
                if (kinds := self.listener_kinds.get(listener)) is None:
                    kinds = self.listener_kinds[listener] = Counter()
                kinds[key.kind] += 1
                if (routes := self.listener_routes.get(listener)) is None:
                    self.listener_routes[listener] = {key}
                else:
                    routes.add(key)
        for gateway_key, listener_name in _accepted_on(entry):
            if (gateway := self.attached.get(gateway_key)) is None:
                gateway = self.attached[gateway_key] = {}
            gateway[listener_name] = gateway.get(listener_name, 0) + 1

    def _forget(self, entry: _Entry) -> None:
        key = entry.key
        if not self.bulk:
            keys = self.keys[key.kind]
            del keys[bisect.bisect_left(keys, _sort_key(key), key=_sort_key)]
        del self.entries[key]
        self.conflicted.discard(key)
        self.with_problems.discard(key)
        self.with_hostnames.discard(key)
        for name in entry.names.hostnames:
            remove_key(self.hostname_readers, name, key)
        self.readers_of_all.discard(key)
        for service in entry.services_read or ():
            remove_key(self.readers, service, key)
        for _, target in entry.grant_questions:
            remove_key(self.grant_readers, target.namespace, key)
        for name in entry.rules.clusters:
            remove_key(self.cluster_sources, name, key)
            self.unresolved.add(name)
        l4 = key.kind in _L4_KINDS
        self.l4_keys.discard(key)
        for parent in entry.attached:
            for attachment in parent.attachments:
                listener = (attachment.gateway, attachment.listener)
                if l4:
                    _discard(self.l4_listener_routes, listener, key)
                    continue
                kinds = self.listener_kinds[listener]
                kinds[key.kind] -= 1
                if not kinds[key.kind]:
                    del kinds[key.kind]
                _discard(self.listener_routes, listener, key)
        for gateway_key, listener_name in _accepted_on(entry):
            gateway = self.attached[gateway_key]
            if gateway[listener_name] > 1:
                gateway[listener_name] -= 1
            else:
                del gateway[listener_name]

    def _resolve(self, names: Iterable[str]) -> None:
        """The build keeps the cluster of the last route (in its order) that resolved it."""
        all_sources, resolved = self.cluster_sources, self.resolved
        changed, aggregates = self.changed_resolved, self.aggregates
        entries = self.entries
        indexed = self.indexed  # the EDS clusters of each Service: read by patches only
        for name in names:
            sources = all_sources.get(name)
            before = resolved.get(name)
            if indexed and isinstance(before, EdsCluster):
                self._eds_cluster(before, name, present=False)
            if sources is not None:
                # One source (most often): no comparison of route keys needed.
                last = max(sources) if type(sources) is set else sources
                cluster = entries[last].rules.clusters[name]
                if before is not cluster:
                    changed.add(name)
                resolved[name] = cluster
                if indexed and isinstance(cluster, EdsCluster):
                    self._eds_cluster(cluster, name, present=True)
                if isinstance(cluster, AggregateCluster):
                    aggregates.add(name)
                else:
                    aggregates.discard(name)
            else:
                if resolved.pop(name, None) is not None:
                    changed.add(name)
                aggregates.discard(name)

    def _eds_cluster(self, cluster: EdsCluster, name: str, present: bool) -> None:
        service = (cluster.service.namespace, cluster.service.name)
        names = self.eds_clusters.get(service)
        if present:
            if names is None:
                self.eds_clusters[service] = {name}
            else:
                names.add(name)
        elif names is not None:
            names.discard(name)
            if not names:
                del self.eds_clusters[service]

    def _dag(self, store: Store, previous_store: Store | None, previous: Dag) -> Dag:
        groups, referenced = self._groups()
        resolved = self.resolved
        # Only clusters some attached route forwards to, in any group.
        clusters = {name: resolved[name] for name in referenced}
        gateways = self.judged.ordered()
        if any(verdict.client_certificate is not None for verdict in gateways):
            groups, clusters = with_client_certificates(groups, clusters, gateways)
            # Only clusters some group still references (a variant may replace the original).
            used = {name for group in groups.values() for name in group.clusters}
            clusters = {name: cluster for name, cluster in clusters.items() if name in used}
        if self.aggregates:
            groups, clusters = with_aggregate_children(groups, clusters)
        changed, self.changed_resolved = self.changed_resolved, set()
        allowed = self.options.endpoint_networks
        checked_from: Mapping[str, Cluster] = clusters
        if previous_store is None:
            assignments = load_assignments(clusters, store, allowed)
        elif self.aggregates or self.had_aggregates:
            # Children of aggregates are defined beside the clusters resolved: compare all.
            assignments = updated_load_assignments(
                clusters,
                previous.clusters,
                previous.load_assignments,
                self.changed_services,
                self.slices.slices,
                allowed,
            )
        else:
            # Every cluster is the one resolved: those resolved anew, added or removed changed.
            changed |= clusters.keys() ^ previous.clusters.keys()
            assignments = patched_load_assignments(
                clusters,
                previous.load_assignments,
                changed,
                self.changed_services,
                self.eds_clusters,
                self.slices.slices,
                allowed,
            )
            # Checked external names' addresses, and ExternalNames' externalIPs: only those
            # of the clusters that changed or whose name the DNS check observed anew (the
            # others are the previous ones, kept above).
            observed = self.observed
            checked_from = {
                name: cluster
                for name, cluster in clusters.items()
                if name in changed
                or (isinstance(cluster, DnsCluster) and cluster.hostname in observed)
            }
        self.changed_services = set()
        self.observed = set()
        # Checked external names' addresses, and ExternalNames' externalIPs (as dag.build).
        assignments.update(
            checked_assignments(
                checked_from,
                self.dns,
                self.options.external_names,
                self.options.dns_lookup_family,
            )
        )
        self.upstream_problems = [
            *(
                self.slices.problems()
                if self.indexed
                else slice_problems(store.endpoint_slices.values(), allowed)
            ),
            *affinity_timeout_problems(clusters.values(), store.services),
        ]
        self.had_aggregates = bool(self.aggregates)
        if previous_store is not None:
            # Unchanged mappings stay the same objects: translation then skips them at once.
            if clusters == previous.clusters:
                clusters = previous.clusters  # type: ignore[assignment]
            if assignments == previous.load_assignments:
                assignments = previous.load_assignments  # type: ignore[assignment]
        return Dag(
            groups=groups,
            clusters=clusters,
            load_assignments=assignments,
            # Statuses first: the Gateways' addresses add problems.
            statuses=self._statuses(previous, previous_store),
            problems=self._problems(),
            dns_hostnames=self._checked_hostnames() if self.options.dns_check else (),
            dns_routes=self._dns_routes() if self.options.dns_check else {},
        )

    def _groups(self) -> tuple[dict[str, NodeGroup], Iterable[str]]:
        """What each group of Envoys receives (the all-gateways group first), and the names
        of the clusters any of them references."""
        if not self.indexed:
            return self._groups_made()
        groups: dict[str, NodeGroup] = {}
        for name, index in self.indexes.items():
            if name != ALL_GATEWAYS:
                groups[name] = index.group()
        single = self.single and not self._served_elsewhere()
        self.shadowed = {} if single else self.every_shadowed
        if single:
            only = next(iter(groups.values()))
            if self.copied is None or self.copied[0] is not only:
                self.copied = only, dataclasses.replace(only, name=ALL_GATEWAYS)
            everyone = self.copied[1]
            referenced: Iterable[str] = everyone.clusters
        else:
            everyone = self.indexes[ALL_GATEWAYS].group()
            referenced = sorted(
                {name for group in (everyone, *groups.values()) for name in group.clusters}
            )
        return {ALL_GATEWAYS: everyone, **groups}, referenced

    def _groups_made(self) -> tuple[dict[str, NodeGroup], Iterable[str]]:
        """_groups without node group indexes: each group made from the routes served."""
        judged, entries = self.judged, self.entries
        served: list[ServedRoutes] = []
        served_l4: list[ServedL4Route] = []
        for kind in sorted(self.keys):  # the routes in ObjectKey order
            for key in self.keys[kind]:
                for _, item in entries[key].served():
                    if isinstance(item, ServedL4Route):
                        served_l4.append(item)
                    else:
                        served.append(item)
        # Routes on a ListenerSet's listeners are served with its Gateway's.
        by_gateway: dict[ObjectKey, list[ServedRoutes]] = {}
        for item in served:
            by_gateway.setdefault(judged.owner(item.attachment.gateway), []).append(item)
        l4_by_gateway: dict[ObjectKey, list[ServedL4Route]] = {}
        for l4_item in served_l4:
            owner = judged.owner(l4_item.attachment.gateway)
            l4_by_gateway.setdefault(owner, []).append(l4_item)
        gateways = judged.ordered()
        groups: dict[str, NodeGroup] = {}
        for verdict in gateways:
            key = verdict.gateway.key
            groups[_group_name(key)] = node_group(
                _group_name(key),
                judged.with_children(verdict),
                by_gateway.get(key, []),
                l4_by_gateway.get(key, []),
            )
        served_gateways = by_gateway.keys() | l4_by_gateway.keys()
        single = self.single and not served_gateways - {gateways[0].gateway.key}
        self.shadowed = {} if single else self.every_shadowed
        if single:
            everyone = dataclasses.replace(next(iter(groups.values())), name=ALL_GATEWAYS)
            referenced: Iterable[str] = everyone.clusters
        else:
            every = [item for verdict in gateways for item in judged.with_children(verdict)]
            everyone = node_group(ALL_GATEWAYS, every, served, served_l4)
            referenced = sorted(
                {name for group in (everyone, *groups.values()) for name in group.clusters}
            )
        return {ALL_GATEWAYS: everyone, **groups}, referenced

    def _served_elsewhere(self) -> bool:
        """Whether routes are served on the listeners of a ListenerSet whose Gateway is not
        the one Gateway (then the all-gateways group is made of every listener)."""
        judged = self.judged
        if not judged.listener_sets:
            return False
        (only,) = judged.gateways.values()
        return any(
            judged.owner(item.attachment.gateway) != only.gateway.key
            for entry in self.entries.values()
            for _, item in entry.served()
        )

    def _dns_routes(self) -> dict[ObjectKey, tuple[tuple[str, ...], int]]:
        """What dns_routes gives for every route: its external names and generation."""
        return {
            key: (entry.names.hostnames, entry.route.meta.generation)
            for key, entry in self.entries.items()
            if entry.names is not None and entry.names.hostnames
        }

    def _problems(self) -> tuple[Problem, ...]:
        problems = list(self.judged.problems)
        entries = self.entries
        for key in sorted(self.conflicted, key=_sort_key):
            problems.extend(entries[key].conflicts)
        for key in sorted(self.with_problems, key=_sort_key):  # the build's order: by key
            problems.extend(entries[key].problems)
        problems.extend(self.shadowed.values())
        problems.extend(self.address_problems)
        problems.extend(self.upstream_problems)
        # Stable: an object's problems keep the order of its fields.
        return tuple(sorted(problems, key=lambda problem: _sort_key(problem.object)))

    def _statuses(
        self, previous: Dag, previous_store: Store | None
    ) -> dict[ObjectKey, ObjectStatus]:
        front = sorted(
            frontend_statuses(self.judged, self.attached, self.shadowed), key=status_order
        )
        # Gateway addresses may follow a Service's load balancer: made again every time.
        with_addresses = {status.key: status for status in front}
        self.address_problems = with_gateway_addresses(with_addresses, self.store, self.options)
        front = list(with_addresses.values())
        policies = self.store.backend_tls_policies
        made = policy_statuses(self._policy_upstreams(), self.context) if policies else []
        replaced, self.replaced = self.replaced, None
        if (
            replaced is not None
            and previous_store is not None
            and previous_store.backend_tls_policies.keys() == policies.keys()
        ):
            # The same objects in the same order: the previous statuses with the changed ones
            # replaced keep the build's order without sorting ten thousand keys again.
            statuses = dict(previous.statuses)
            for key in replaced:
                statuses[key] = self.entries[key].status
        else:
            statuses = {}
            entries = self.entries
            for status in front:
                statuses[status.key] = status
            for kind in _ROUTE_FIELDS:  # in status_order's order of kinds
                for key in self.keys[kind]:
                    statuses[key] = entries[key].status
        for status in (*front, *made):
            statuses[status.key] = status
        return statuses

    def _policy_upstreams(self) -> list[RouteUpstreams]:
        """The routes that may reach a Service some BackendTLSPolicy targets: the only ones
        policy_statuses finds anything in."""
        # (Unindexed, what each route read is unknown: every route may.)
        candidates = set(self.readers_of_all if self.indexed else self.entries)
        for policy in self.store.backend_tls_policies.values():
            for ref in policy.target_refs:
                candidates.update(keys_at(self.readers, (policy.meta.namespace, ref.name)))
        entries = self.entries
        return [
            RouteUpstreams(entries[key].outcome, entries[key].names)  # type: ignore[arg-type]
            for key in sorted(candidates)
        ]

    def _checked_hostnames(self) -> tuple[str, ...]:
        """What checked_hostnames gives for every route: the external names of routes
        attached somewhere."""
        entries = self.entries
        return tuple(
            sorted({name for key in self.with_hostnames for name in entries[key].names.hostnames})
        )


# How many routes an update changes before their keys are sorted at once.
_BULK = 64
_Recording = tuple[RecordingServices, RecordingGrants, BuildContext]


def _sort_key(key: ObjectKey) -> tuple[str, str, str]:
    """ObjectKey's order, as a tuple compared without calling Python code."""
    return key.kind, key.namespace, key.name


def _accepted_on(entry: _Entry) -> set[tuple[ObjectKey, str]]:
    """The (Gateway, listener) pairs that accepted the route (each counts it once)."""
    return {
        (attachment.gateway, attachment.listener)
        for parent in entry.parents
        if parent.accepted
        for attachment in parent.attachments
    }


def _patchable(store: Store, judged: Frontends) -> bool:
    """Whether changes to `store` can be patched: not yet with ListenerSets, Gateway client
    certificates or client certificate validation (their builds are all full)."""
    return not (
        store.listener_sets
        or any(
            verdict.client_certificate is not None
            or getattr(verdict.gateway, "frontend_tls", None) is not None
            for verdict in judged.gateways.values()
        )
    )


def _reads_config_maps(store: Store) -> bool:
    """Whether a build reads ConfigMaps: CA certificates of BackendTLSPolicies and of
    Gateways' client certificate validation."""
    return bool(store.backend_tls_policies) or any(
        gateway.frontend_tls is not None for gateway in store.gateways.values()
    )


def _needs_names(store: Store, options: BuildOptions) -> bool:
    """Whether routes must record the backends they reach (as dag.build decides)."""
    return bool(store.backend_tls_policies) or options.dns_check


def _route(store: Store, key: ObjectKey) -> Route | None:
    routes: Mapping[NamespacedName, Route] = getattr(store, _ROUTE_FIELDS[key.kind])
    return routes.get((key.namespace, key.name))


def _without_certificates(judged: Frontends) -> Frontends:
    """The verdicts with each listener's certificates reduced to whether it has any."""
    return dataclasses.replace(
        judged,
        gateways={
            key: dataclasses.replace(
                verdict,
                listeners=tuple(
                    dataclasses.replace(v, certificates=_SOME if v.certificates else ())
                    for v in verdict.listeners
                ),
            )
            for key, verdict in judged.gateways.items()
        },
    )


# What a listener's certificates become in _without_certificates when it has some.
_SOME: tuple = (None,)


def _gateway_of(group: str) -> NamespacedName:
    namespace, name = group.split("/", 1)
    return namespace, name


def _group_name(gateway: ObjectKey) -> str:
    return f"{gateway.namespace}/{gateway.name}"


def _discard(index: dict[_K, set[ObjectKey]], at: _K, key: ObjectKey) -> None:
    keys = index.get(at)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[at]
