"""The build, from a store to a Dag: the one place its steps are ordered. A full build
(`full_build`, which `dag.build.build` is) feeds every route to an empty build; later builds
feed it only the routes a change reaches, and the result is the same Dag.

Every route (HTTP, gRPC, TCP, TLS, UDP) is an entry (entries.py): its parent outcomes, rules,
problems, status and served items, with what it read (the Services and the namespaces of the
ReferenceGrants it consulted), found by what a change touches (route_index.py). A change to
routes, Services, EndpointSlices, ReferenceGrants or Secrets, or new DNS check observations,
recomputes the entries it reaches (and those whose conflicts change: conflicts.py) where
they are kept (entry_replacement.py), resolves again the clusters they define
(cluster_resolution.py) and feeds their served items to each node group's index
(served_groups.py), which rebuilds only the virtual hosts (or TCP, TLS and UDP listeners)
those items reach; `assemble` makes the Dag of these parts, keeping the previous Dag's objects
wherever nothing changed.

Which changes are patched is patchability.py's to say. A change to Gateways, GatewayClasses,
ListenerSets or Namespaces is a full build, and so is one to a Secret or ReferenceGrant that
changes how a Gateway listener is judged: they reach every route. So are stores with
ListenerSets or Gateway client certificates, and the appearance of the first BackendTLSPolicy
or the removal of the last (from then on every route records the backends it reaches).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from dragoman.dag.context import BuildContext, build_context
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.frontends.listeners import Frontends, frontends
from dragoman.dag.incremental.assemble import DagParts, Previous, assemble
from dragoman.dag.incremental.changes import StoreChanges, store_changes
from dragoman.dag.incremental.cluster_resolution import ClusterResolution
from dragoman.dag.incremental.entries import (
    ROUTE_FIELDS,
    EntryInputs,
    Recording,
    Route,
    store_route,
    with_dns_resolved,
)
from dragoman.dag.incremental.entry_replacement import EntryReplacement
from dragoman.dag.incremental.patchability import (
    BACKEND_TLS_FIELDS,
    PATCHABLE_FIELDS,
    needs_names,
    patchable,
    policy_targets,
    reads_config_maps,
    serves_alike,
)
from dragoman.dag.incremental.reach import certificates_alone_differ, reached_routes
from dragoman.dag.incremental.route_index import RouteIndex
from dragoman.dag.incremental.served_groups import NodeGroups
from dragoman.dag.incremental.service_targets import ServiceTargetIndex, TargetChanges
from dragoman.dag.incremental.slices import SliceIndex, service_slices
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.objects import ObjectKey
from dragoman.store import NamespacedName, Store

# What a build did: all of it, the entries a change reached, only load assignments (of
# changed EndpointSlices; or of names the DNS check observed anew, with the DNSResolved
# conditions of their routes), or nothing (the store and observations were the same).
BuildKind = Literal["full", "incremental", "endpoints", "unchanged"]

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
            if not reads_config_maps(previous) and not reads_config_maps(store):
                changes.pop("config_maps", None)  # read only for CA certificates
            observed = {n for n in dns.keys() | self._dns.keys() if dns.get(n) != self._dns.get(n)}
            if not changes and not observed:
                return self._keep(store, dns, self._dag, "unchanged")
            if (
                not changes
                and build is not None
                and serves_alike(build.options, build.dns, dns, observed)
            ):
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
        self.with_names = needs_names(store, options)
        # Whether changes other than to Gateways can be patched (see patchability.patchable).
        self.patchable = patchable(store, judged)
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
        self.targets.begin()
        if (
            not self.patchable
            or changes.keys() - PATCHABLE_FIELDS
            or needs_names(store, self.options) != self.with_names
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
                if not patchable(store, judged):
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
            tls=policy_targets(self.store, store) if changes.keys() & BACKEND_TLS_FIELDS else (),
            observed=self.observed,
            slices=self.changed_services,
        )
        return self.update(store, context, routes, self.store, targets)

    def observe(self, dns: DnsObservations, observed: Iterable[str]) -> Dag:
        """The Dag after new DNS check observations `dns` of names served alike (see
        serves_alike; `observed`: the names whose observation changed): the routes forwarding
        to them have their DNSResolved conditions made again, the names their addresses."""
        self.targets.begin()
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
        recording = Recording(context) if self.indexed else None
        replacement = EntryReplacement(self.routes, self.clusters, inputs, recording)
        # Many routes (a full build): their keys are sorted once, not inserted one by one.
        # (No other step depends on the order routes are fed in: indexes sort what they keep.)
        if len(routes) > _BULK:
            self.routes.begin_bulk()
        replaced = replacement.replace(routes)
        self.routes.end_bulk()
        replacement.reconflict(replaced)
        self.clusters.resolve(self.routes.entries)
        self.groups.update(replacement.removed, replacement.added)
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
        deferred = self.targets.deferred(
            self.context, self.dns, targets, dag, service_slices(self.store, self.slices)
        )
        self.dag = dataclasses.replace(dag, deferred_targets=deferred)
        self.changed_services, self.observed = set(), set()
        return self.dag
