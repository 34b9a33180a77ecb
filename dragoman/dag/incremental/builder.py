"""The build, from a store to a Dag: the one place its steps are ordered. A full build
(`full_build`, which `dag.build.build` is) feeds every route to an empty build; later builds
feed it only the routes a change reaches, and the result is the same Dag.

Every route (HTTP, gRPC, TCP, TLS, UDP) is an entry (entries.py): its parent outcomes, rules,
problems, status and served items, with what it read (the Services and the namespaces of the
ReferenceGrants it consulted), found by what a change touches (route_index.py). A change to
routes, Services, EndpointSlices, ReferenceGrants or Secrets, or new DNS check observations,
recomputes the entries it reaches (and those whose conflicts change: conflicts.py), resolves
again the clusters they define (cluster_resolution.py) and feeds their served items to each
node group's index (served_groups.py), which rebuilds only the virtual hosts (or TCP, TLS and
UDP listeners) those items reach; `assemble` makes the Dag of these parts, keeping the
previous Dag's objects wherever nothing changed.

A change to Gateways, GatewayClasses, ListenerSets or Namespaces is a full build, and so is
one to a Secret or ReferenceGrant that changes how a Gateway listener is judged: they reach
every route. So are stores with ListenerSets or Gateway client certificates, and the
appearance of the first BackendTLSPolicy or the removal of the last (from then on every
route records the backends it reaches).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from dragoman.dag.context import BuildContext, build_context
from dragoman.dag.dns_check import DnsObservations, dns_refusal
from dragoman.dag.frontends.listeners import Frontends, frontends
from dragoman.dag.incremental.assemble import DagParts, Previous, assemble
from dragoman.dag.incremental.changes import StoreChanges, store_changes
from dragoman.dag.incremental.cluster_resolution import ClusterResolution
from dragoman.dag.incremental.conflicts import conflict_changes
from dragoman.dag.incremental.entries import (
    ROUTE_FIELDS,
    EntryInputs,
    Recording,
    Route,
    RouteEntry,
    route_entry,
    store_route,
    with_dns_resolved,
)
from dragoman.dag.incremental.reach import certificates_alone_differ, reached_routes
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.incremental.served_groups import NodeGroups, ServedItem
from dragoman.dag.incremental.service_targets import ServiceTargetIndex, TargetChanges
from dragoman.dag.incremental.slices import SliceIndex
from dragoman.dag.model import Dag
from dragoman.dag.node_groups.group_index import ServedKey
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.endpoints import slices_by_service
from dragoman.objects import EndpointSlice, ObjectKey
from dragoman.store import NamespacedName, Store

# What a build did: all of it, the entries a change reached, only load assignments (of
# changed EndpointSlices; or of names the DNS check observed anew, with the DNSResolved
# conditions of their routes), or nothing (the store and observations were the same).
BuildKind = Literal["full", "incremental", "endpoints", "unchanged"]

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
        *ROUTE_FIELDS.values(),
    }
)
# Store fields a Service's backend TLS reads (the proxyless Service targets of the Services
# BackendTLSPolicies target are made again when one changes).
_BACKEND_TLS_FIELDS = frozenset({"secrets", "config_maps", "backend_tls_policies"})
# How many routes an update changes before their keys are sorted at once.
_BULK = 64


@dataclass(frozen=True, slots=True)
class BuildResult:
    dag: Dag
    kind: BuildKind
    # An endpoints build from new DNS check observations alone: the names observed anew (each
    # served before and after: only their load assignments and routes' statuses changed).
    dns_changed: frozenset[str] = frozenset()


def full_build(store: Store, options: BuildOptions, dns: DnsObservations | None = None) -> Dag:
    """Listeners, route tables and clusters per node group, and every problem found.

    `dns`: what the DNS check last observed per external name (used when options.dns_check).
    The same steps as an incremental build's, without the indexes a later change would need.
    """
    return _Build.made(store, options, dict(dns or {}), indexed=False).dag


class IncrementalBuild:
    """Builds Dags for successive stores, each from what changed since the previous one."""

    def __init__(self, options: BuildOptions = BuildOptions()) -> None:
        self.options = options
        self._build: _Build | None = None
        self._store: Store | None = None
        self._dag: Dag | None = None
        self._dns: DnsObservations = {}

    @property
    def dag(self) -> Dag | None:
        return self._dag

    def build(self, store: Store, dns: DnsObservations | None = None) -> BuildResult:
        """The Dag of `store` with `dns` (the DNS check's observations)."""
        dns = dict(dns or {})
        previous, build = self._store, self._build
        if previous is not None and self._dag is not None:
            changes = store_changes(previous, store)
            if not _reads_config_maps(previous) and not _reads_config_maps(store):
                changes.pop("config_maps", None)  # read only for CA certificates
            observed = {n for n in dns.keys() | self._dns.keys() if dns.get(n) != self._dns.get(n)}
            if not changes and not observed:
                return self._keep(store, dns, self._dag, "unchanged")
            if not changes and build is not None and build.serves_alike(dns, observed):
                dag = build.observe(dns, observed)
                return self._keep(store, dns, dag, "endpoints", frozenset(observed))
            patched = build.patch(store, changes, dns, observed) if build is not None else None
            if patched is not None:
                only_slices = changes.keys() == {"endpoint_slices"} and not observed
                kind: BuildKind = "endpoints" if only_slices else "incremental"
                return self._keep(store, dns, patched, kind)
        self._build = _Build.made(store, self.options, dns)
        return self._keep(store, dns, self._build.dag, "full")

    def _keep(
        self,
        store: Store,
        dns: DnsObservations,
        dag: Dag,
        kind: BuildKind,
        dns_changed: frozenset[str] = frozenset(),
    ) -> BuildResult:
        self._store, self._dns, self._dag = store, dns, dag
        return BuildResult(dag, kind, dns_changed)


class _Build:
    """A patchable store's Dag, the parts it is made of and the indexes from objects to them."""

    def __init__(
        self,
        store: Store,
        options: BuildOptions,
        dns: DnsObservations,
        context: BuildContext,
        judged: Frontends,
        indexed: bool = True,
    ) -> None:
        self.store, self.options, self.dns = store, options, dns
        self.context, self.judged = context, judged
        # False: built once, never patched; what only a patch reads is not kept (what each
        # route read, node group indexes: groups are made from the routes served).
        self.indexed = indexed
        self.with_names = _needs_names(store, options)
        # Whether changes other than to Gateways can be patched (see _patchable).
        self.patchable = _patchable(store, judged)
        self.routes = RouteIndex(indexed)
        self.clusters = ClusterResolution(indexed)
        self.groups = NodeGroups(judged, indexed)
        self.targets = ServiceTargetIndex(indexed)
        # EndpointSlices by Service, and the Services whose slices the last change changed.
        self.slices = (
            SliceIndex(store.endpoint_slices, options.endpoint_networks) if indexed else None
        )
        self.changed_services: set[NamespacedName] = set()
        # The names whose DNS check observation the last change changed.
        self.observed: set[str] = set()
        self.dag = Dag()

    @classmethod
    def made(
        cls, store: Store, options: BuildOptions, dns: DnsObservations, indexed: bool = True
    ) -> _Build:
        """A full build: `store` fed every route."""
        context = build_context(store, options, dns)
        # dragoman's GatewayClasses and Gateways, each listener judged (TLS, conflicts, kinds).
        judged = frontends(context)
        build = cls(store, options, dns, context, judged, indexed)
        every: dict[ObjectKey, Route | None] = {}
        for name in ROUTE_FIELDS.values():
            routes: Mapping[NamespacedName, Route] = getattr(store, name)
            every.update((route.key, route) for route in routes.values())
        build.update(store, context, every, None, TargetChanges(every=True))
        return build

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
        if dns is not None:
            self.dns, self.observed = dns, set(observed)
        context = build_context(store, self.options, self.dns)
        assert self.slices is not None  # indexed: only such builds are patched
        self.changed_services = self.slices.update(
            self.store.endpoint_slices, store.endpoint_slices, changes.get("endpoint_slices", ())
        )
        if changes.keys() & {"reference_grants", "secrets"}:
            # Listeners read both (certificateRefs). New certificates alone (a rotation)
            # change only the HTTPS listeners; a listener judged otherwise reaches every route.
            judged = frontends(context)
            if judged != self.judged:
                if not certificates_alone_differ(self.judged, judged):
                    return None
                if not _patchable(store, judged):
                    return None
                self.judged = judged
                self.groups.rejudged(judged)
        reached = reached_routes(
            self.routes, self.store, store, changes, self.observed, self.with_names
        )
        routes = {key: store_route(store, key) for key in reached}
        targets = TargetChanges(
            every=False,
            services=changes.get("services", ()),
            grants="reference_grants" in changes,
            tls=_policy_targets(self.store, store) if changes.keys() & _BACKEND_TLS_FIELDS else (),
            observed=self.observed,
            slices=self.changed_services,
        )
        return self.update(store, context, routes, self.store, targets)

    def serves_alike(self, dns: DnsObservations, observed: Iterable[str]) -> bool:
        """Whether every name `observed` anew in `dns` is served before and after (the DNS
        check allows it both times): then its clusters stay as they are."""
        if not self.options.dns_check:
            return False
        policy, before = self.options.external_names, self.dns
        return all(
            dns_refusal(name, before.get(name), policy) is None
            and dns_refusal(name, dns.get(name), policy) is None
            for name in observed
        )

    def observe(self, dns: DnsObservations, observed: Iterable[str]) -> Dag:
        """The Dag after new DNS check observations `dns` of names served alike (see
        serves_alike; `observed`: the names whose observation changed): the routes forwarding
        to them have their DNSResolved conditions made again, the names their addresses."""
        previous = Previous(self.store, self.dag, self.clusters.has_aggregates)
        self.dns, self.observed = dns, set(observed)
        self.context = build_context(self.store, self.options, dns)
        inputs = self._inputs()
        replaced = {key for name in self.observed for key in self.routes.hostname_readers(name)}
        for key in replaced:
            self.routes.restate(with_dns_resolved(self.routes.entries[key], inputs))
        targets = TargetChanges(every=False, observed=self.observed, slices=(), addresses_only=True)
        return self._assembled(previous, replaced, targets)

    def update(
        self,
        store: Store,
        context: BuildContext,
        routes: Mapping[ObjectKey, Route | None],
        previous_store: Store | None,
        targets: TargetChanges,
    ) -> Dag:
        """Replace the entries of `routes` (None: deleted) and make the Dag (`targets`: what
        changed for the proxyless Service targets)."""
        previous = (
            None
            if previous_store is None
            else Previous(previous_store, self.dag, self.clusters.has_aggregates)
        )
        self.store, self.context = store, context
        inputs = self._inputs()
        removed: dict[ServedKey, ServedItem] = {}
        added: dict[ServedKey, ServedItem] = {}
        # Many routes (a full build): their keys are sorted once, not inserted one by one.
        # (No other step depends on the order routes are fed in: indexes sort what they keep.)
        if len(routes) > _BULK:
            self.routes.begin_bulk()
        replaced = self._replaced(routes, inputs, removed, added)
        self.routes.end_bulk()
        for old, entry in conflict_changes(self.routes, inputs):
            self._forget(old)
            for served, item in old.served():
                # Placed by this update (not yet in the indexes), or by an earlier one.
                if added.pop(served, None) is None:
                    removed[served] = item
            self._remember(entry)
            added.update(entry.served())
            if replaced is not None:
                replaced.add(entry.key)
        self.clusters.resolve(self.routes.entries)
        self.groups.update(removed, added)
        return self._assembled(previous, replaced, targets)

    def _inputs(self) -> EntryInputs:
        return EntryInputs(
            self.store, self.context, self.judged, self.options, self.dns, self.with_names
        )

    def _assembled(
        self, previous: Previous | None, replaced: set[ObjectKey] | None, targets: TargetChanges
    ) -> Dag:
        """The Dag of the build's parts now (`replaced`: the routes whose entries changed since
        `previous`, None when routes came or went) and its proxyless Service targets (last:
        they take the Dag's load assignments of the clusters both have); what changed since
        is forgotten."""
        dag = assemble(
            DagParts(
                store=self.store,
                options=self.options,
                context=self.context,
                dns=self.dns,
                judged=self.judged,
                routes=self.routes,
                served=self.groups.served(self.routes),
                resolved=self.clusters.resolved,
                has_aggregates=self.clusters.has_aggregates,
                changed_clusters=self.clusters.take_changed(),
                changed_services=self.changed_services,
                observed=self.observed,
                replaced=replaced,
                eds_clusters_of=self.clusters.eds_clusters,
                slices=self.slices,
                previous=previous,
            )
        )
        service_targets = self.targets.update(
            self.context, self.dns, targets, dag, self._slices_of()
        )
        self.dag = dataclasses.replace(dag, service_targets=service_targets)
        self.changed_services, self.observed = set(), set()
        return self.dag

    def _slices_of(self) -> Callable[[NamespacedName], Sequence[EndpointSlice]]:
        """Each Service's EndpointSlices in name order: from the index, or (a build never
        patched) grouped in one pass when first asked."""
        if self.slices is not None:
            return self.slices.slices
        store = self.store
        grouped: dict[NamespacedName, list[EndpointSlice]] | None = None

        def slices_of(service: NamespacedName) -> Sequence[EndpointSlice]:
            nonlocal grouped
            if grouped is None:
                grouped = slices_by_service(store)
            return grouped.get(service, ())

        return slices_of

    def _replaced(
        self,
        routes: Mapping[ObjectKey, Route | None],
        inputs: EntryInputs,
        removed: dict[ServedKey, ServedItem],
        added: dict[ServedKey, ServedItem],
    ) -> set[ObjectKey] | None:
        """Replace the entries of `routes`, noting the items they served and serve in
        `removed` and `added`; the routes whose entries were replaced (None: routes came or
        went)."""
        recording = Recording(self.context) if self.indexed else None
        if not self.routes.entries:
            # A full build: nothing to forget or replace, nothing in the indexes yet.
            for key, route in routes.items():
                if route is not None:
                    entry = route_entry(key, route, inputs, recording)
                    self._remember(entry)
                    if self.indexed:
                        added.update(entry.served())
            return None
        replaced: set[ObjectKey] | None = set()
        for key, route in routes.items():
            old = self.routes.entries.get(key)
            if old is not None:
                self._forget(old)
                removed.update(old.served())
            if route is not None:
                entry = route_entry(key, route, inputs, recording)
                self._remember(entry)
                added.update(entry.served())
            if replaced is not None and old is not None and route is not None:
                replaced.add(key)
            elif old is not None or route is not None:
                replaced = None
        return replaced

    def _remember(self, entry: RouteEntry) -> None:
        self.routes.add(entry)
        self.clusters.add(entry)

    def _forget(self, entry: RouteEntry) -> None:
        self.routes.remove(entry)
        self.clusters.remove(entry)


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


def _policy_targets(*stores: Store) -> set[NamespacedName]:
    """The Services some BackendTLSPolicy of the stores targets."""
    return {
        (policy.meta.namespace, ref.name)
        for store in stores
        for policy in store.backend_tls_policies.values()
        for ref in policy.target_refs
    }


def _reads_config_maps(store: Store) -> bool:
    """Whether a build reads ConfigMaps: CA certificates of BackendTLSPolicies and of
    Gateways' client certificate validation."""
    return bool(store.backend_tls_policies) or any(
        gateway.frontend_tls is not None for gateway in store.gateways.values()
    )


def _needs_names(store: Store, options: BuildOptions) -> bool:
    """Whether routes must record the backends they reach (as dag.build decides)."""
    return bool(store.backend_tls_policies) or options.dns_check
