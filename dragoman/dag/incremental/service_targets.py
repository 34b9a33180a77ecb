"""The proxyless gRPC clients' Service targets, kept Service by Service: a change makes again
only the targets of the Services it reaches, and the load assignments of the clusters it
changed (or whose EndpointSlices or DNS check observation changed)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from itertools import chain

from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.external_names import in_cluster_target, normalise
from dragoman.dag.incremental.slices import service_slices
from dragoman.dag.key_index import KeyIndex
from dragoman.dag.model import (
    NO_SERVICE_TARGETS,
    AggregateCluster,
    Cluster,
    Dag,
    Deferred,
    DnsCluster,
    EdsCluster,
    LoadAssignment,
    ServiceTarget,
    ServiceTargets,
)
from dragoman.dag.proxyless.targets import service_port_targets, target_assignment
from dragoman.dag.upstreams.in_cluster_first import PREFER_SERVICE
from dragoman.objects import EndpointSlice, Service
from dragoman.store import NamespacedName

SlicesOf = Callable[[NamespacedName], Sequence[EndpointSlice]]


@dataclass(frozen=True, slots=True)
class TargetChanges:
    """What changed since the targets were last made."""

    # Every Service's resolution may have changed (the first build).
    every: bool
    services: Collection[NamespacedName] = ()  # added, changed or removed
    grants: bool = False  # ReferenceGrants changed: cross-namespace aliases may resolve anew
    # Services whose backend TLS may have changed (targets of BackendTLSPolicies, before or
    # after a change to the policies, their Secrets or ConfigMaps).
    tls: Collection[NamespacedName] = ()
    observed: Collection[str] = ()  # external names the DNS check observed anew
    # Services whose EndpointSlices changed (None: not known, every one may have).
    slices: Collection[NamespacedName] | None = None
    # Only the DNS check's addresses changed, of names served alike: no cluster did.
    addresses_only: bool = False


class ServiceTargetIndex:
    """Each Service's port targets and the clusters and load assignments they need.

    `indexed` False (a build never patched): the targets are made once, and what only a
    later change reads (who defines and reads what) is not kept."""

    def __init__(self, indexed: bool = True) -> None:
        self._indexed = indexed
        # Each Service's targets, by port, the Services in order.
        self._targets_of: dict[NamespacedName, tuple[ServiceTarget, ...]] = {}
        # The clusters each Service's targets define, by name (an aggregate's children too).
        self._defined: dict[NamespacedName, dict[str, Cluster]] = {}
        # The Services defining each cluster name: the greatest one's cluster is taken (the
        # last in the Services' order, as a full pass would leave it).
        self._definers: KeyIndex[str, NamespacedName] = KeyIndex()
        # What each ExternalName's resolution may read beyond itself (the Services it aliases
        # or prefers, the external names the DNS check observes), to the Services reading it.
        self._reads: dict[NamespacedName, Reads] = {}
        self._readers: KeyIndex[NamespacedName, NamespacedName] = KeyIndex()
        self._hostname_readers: KeyIndex[str, NamespacedName] = KeyIndex()
        self._cross_namespace: set[NamespacedName] = set()  # reading another namespace
        self._clusters: dict[str, Cluster] = {}
        self._assignments: dict[str, LoadAssignment] = {}
        self._targets = NO_SERVICE_TARGETS
        # Services were added out of order since the listeners were last sorted.
        self._unsorted = False
        # What changed since the targets were last made (None: nothing), and which build
        # is the last begun: its targets are made from the index; an earlier one's alone.
        self._pending: TargetChanges | None = None
        self._generation = 0
        # Builds run in one thread, and the targets are asked for in another.
        self._lock = threading.Lock()

    def begin(self) -> None:
        """A build begins: from now on, the targets of earlier builds are made alone when
        asked for (what the index reads, such as the EndpointSlices, is about to change)."""
        with self._lock:
            self._generation += 1

    def deferred(
        self,
        context: BuildContext,
        dns: DnsObservations,
        changes: TargetChanges,
        dag: Dag,
        slices_of: SlicesOf,
    ) -> Deferred[ServiceTargets]:
        """The targets after `changes`, made when first asked for (`dag`: the build's Dag,
        whose load assignments are taken for the clusters it shares with the targets).

        Until then the changes wait, merged with those of later builds: a deployment
        without proxyless clients never makes a target. Asked for after a later build,
        the targets of this one are made alone, from its own inputs."""
        if not self._indexed:
            return Deferred(lambda: self._made(context, dns, dag, slices_of))
        with self._lock:
            self._pending = merged(self._pending, changes)
            generation = self._generation

        def made() -> ServiceTargets:
            with self._lock:
                if generation == self._generation:
                    pending, self._pending = self._pending, None
                    if pending is not None:
                        self._targets = self._update(context, dns, pending, dag, slices_of)
                    return self._targets
            alone = ServiceTargetIndex(indexed=False)
            return alone._made(context, dns, dag, service_slices(context.store, None))

        return Deferred(made)

    def _update(
        self,
        context: BuildContext,
        dns: DnsObservations,
        changes: TargetChanges,
        dag: Dag,
        slices_of: SlicesOf,
    ) -> ServiceTargets:
        """The targets after `changes`."""
        services = context.store.services
        if changes.every:
            reached: set[NamespacedName] = {*services, *self._targets_of}
        elif changes.addresses_only:
            reached = set()
        else:
            reached = self._reached(changes)
        renamed: set[str] = set()
        # (In order: a first build then inserts every Service in its place.)
        self._unsorted = False
        domain = normalise(context.options.cluster_domain)
        for key in sorted(reached) if changes.every else reached:
            renamed |= self._replace(key, services.get(key), context, domain)
        for name in renamed:
            self._resolve(name)
        # The assignments of the clusters renamed (gone ones too), and of those the change
        # reaches otherwise.
        names = set(renamed)
        names |= self._clusters.keys() if changes.every else self._reached_assignments(changes)
        for name in names:
            self._assign(name, dag, dns, context, slices_of)
        if self._unsorted:
            # New Services: each in its place in the order of Services.
            self._targets_of = dict(sorted(self._targets_of.items()))
            self._unsorted = False
        if not (reached or names):
            return self._targets
        kept = self._targets
        self._targets = ServiceTargets(
            targets=tuple(chain.from_iterable(self._targets_of.values()))
            if reached
            else kept.targets,
            clusters=dict(self._clusters) if renamed else kept.clusters,
            load_assignments=dict(self._assignments),
        )
        return self._targets

    def _made(
        self, context: BuildContext, dns: DnsObservations, dag: Dag, slices_of: SlicesOf
    ) -> ServiceTargets:
        """Every target at once, nothing kept for a later change (what update makes from
        an empty index: the greatest Service defining a cluster name gives it)."""
        domain = normalise(context.options.cluster_domain)
        services = context.store.services
        made: list[ServiceTarget] = []
        clusters: dict[str, Cluster] = {}
        for key in sorted(services):
            for target in service_port_targets(services[key], context, domain, key):
                made.append(target)
                _define(clusters, target.cluster)
        self._clusters = clusters
        for name in clusters:
            self._assign(name, dag, dns, context, slices_of)
        return ServiceTargets(tuple(made), clusters, self._assignments)

    def _reached(self, changes: TargetChanges) -> set[NamespacedName]:
        """The Services whose targets `changes` may change: those changed, and those whose
        resolution reads them (their reads already follow every alias)."""
        seeds = {*changes.services, *changes.tls}
        if changes.grants:
            seeds |= self._cross_namespace
        reached = set(seeds)
        for key in seeds:
            reached.update(self._readers.keys(key))
        for name in changes.observed:
            reached.update(self._hostname_readers.keys(name))
        return reached

    def _replace(
        self, key: NamespacedName, service: Service | None, context: BuildContext, domain: str
    ) -> set[str]:
        """Make the targets of `key` again (`service` None: gone); the names of the clusters
        it defined or defines."""
        names: set[str] = set()
        defined_before = self._defined.pop(key, None)
        if defined_before is not None:
            for name in defined_before:
                self._definers.remove(name, key)
            names.update(defined_before)
            self._forget_reads(key)
        if service is None:
            self._targets_of.pop(key, None)
            return names
        targets = service_port_targets(service, context, domain, key)
        defined: dict[str, Cluster] = {}
        for target in targets:
            _define(defined, target.cluster)
        for name in defined:
            self._definers.add(name, key)
        names.update(defined)
        self._defined[key] = defined
        if service.is_external_name:
            self._remember_reads(key, resolution_reads(service, context, domain))
        if (
            key not in self._targets_of
            and self._targets_of
            and key < next(reversed(self._targets_of))
        ):
            self._unsorted = True
        self._targets_of[key] = targets
        return names

    def _remember_reads(self, key: NamespacedName, reads: Reads) -> None:
        self._reads[key] = reads
        for read in reads.services:
            self._readers.add(read, key)
        for name in reads.hostnames:
            self._hostname_readers.add(name, key)
        if any(namespace != key[0] for namespace, _ in reads.services):
            self._cross_namespace.add(key)

    def _forget_reads(self, key: NamespacedName) -> None:
        reads = self._reads.pop(key, None)
        if reads is None:
            return
        for read in reads.services:
            self._readers.remove(read, key)
        for name in reads.hostnames:
            self._hostname_readers.remove(name, key)
        self._cross_namespace.discard(key)

    def _resolve(self, name: str) -> None:
        last = self._definers.greatest(name)
        if last is None:
            self._clusters.pop(name, None)
        else:
            self._clusters[name] = self._defined[last][name]

    def _reached_assignments(self, changes: TargetChanges) -> set[str]:
        """The clusters whose endpoints the change may have changed: the EDS clusters of
        Services whose EndpointSlices changed, the external names observed anew."""
        names: set[str] = set()
        if changes.slices is None:
            names.update(n for n, c in self._clusters.items() if isinstance(c, EdsCluster))
        else:
            for service in changes.slices:
                # Its EDS clusters are defined by itself or by the Services reading it.
                for key in (service, *self._readers.keys(service)):
                    for name, cluster in self._defined.get(key, {}).items():
                        if isinstance(cluster, EdsCluster) and _service_of(cluster) == service:
                            names.add(name)
        observed = changes.observed
        for key in {key for name in observed for key in self._hostname_readers.keys(name)}:
            # (An aggregate's DNS fallback is defined beside it.)
            for cluster in self._defined.get(key, {}).values():
                if isinstance(cluster, DnsCluster) and cluster.hostname in observed:
                    names.add(cluster.name)
        return names

    def _assign(
        self,
        name: str,
        dag: Dag,
        dns: DnsObservations,
        context: BuildContext,
        slices_of: SlicesOf,
    ) -> None:
        cluster = self._clusters.get(name)
        found: LoadAssignment | None = None
        if cluster is not None:
            same = dag.clusters.get(name)
            if same is cluster or (same is not None and same == cluster):
                found = dag.load_assignments.get(name)  # the same cluster: the same endpoints
            else:
                slices = slices_of(_service_of(cluster)) if isinstance(cluster, EdsCluster) else ()
                found = target_assignment(cluster, slices, dns, context.options)
        if found is None:
            self._assignments.pop(name, None)
        else:
            self._assignments[name] = found


def merged(first: TargetChanges | None, then: TargetChanges) -> TargetChanges:
    """What changed over two builds in turn (`first` None: nothing before `then`). The
    Services either reaches are reached from the index as it was before both: a Service
    whose resolution the two change reads, as it was, one of the Services they change."""
    if first is None:
        return then
    if first.every or then.every:
        return TargetChanges(every=True)
    slices = None if first.slices is None or then.slices is None else {*first.slices, *then.slices}
    return TargetChanges(
        every=False,
        services={*first.services, *then.services},
        grants=first.grants or then.grants,
        tls={*first.tls, *then.tls},
        observed={*first.observed, *then.observed},
        slices=slices,
        addresses_only=first.addresses_only and then.addresses_only,
    )


@dataclass(frozen=True, slots=True)
class Reads:
    services: frozenset[NamespacedName]
    hostnames: frozenset[str]


def resolution_reads(service: Service, context: BuildContext, domain: str) -> Reads:
    """What resolving an ExternalName's ports may read beyond the Service itself: every
    Service its aliases and in-cluster-first preferences lead to (found or not), and the
    external names at their ends (whose DNS check observations it reads). A superset: a
    Service read and not needed only makes its targets again. (`domain`: the cluster
    domain, normalised.)"""
    hostname = normalise(service.external_name)
    if PREFER_SERVICE not in service.meta.annotations and ".svc" not in hostname:
        return Reads(frozenset(), frozenset((hostname,)))  # no alias: the name alone
    services = context.store.services
    own = (service.meta.namespace, service.meta.name)
    read: set[NamespacedName] = set()
    hostnames: set[str] = set()
    todo = [service]
    while todo:
        current = todo.pop()
        if not current.is_external_name:
            continue
        namespace = current.meta.namespace
        found: list[NamespacedName] = []
        preferred = current.meta.annotations.get(PREFER_SERVICE)
        if preferred is not None:
            found.append((namespace, preferred.strip()))
        hostname = normalise(current.external_name)
        target = in_cluster_target(hostname, domain)
        if target is None:
            hostnames.add(hostname)
        else:
            found.append(target)
        for key in found:
            if key != own and key not in read:
                read.add(key)
                if (next_service := services.get(key)) is not None:
                    todo.append(next_service)
    return Reads(frozenset(read), frozenset(hostnames))


def _define(clusters: dict[str, Cluster], cluster: Cluster) -> None:
    """Put `cluster` (an aggregate's children after it) in `clusters`, by name."""
    clusters[cluster.name] = cluster
    if isinstance(cluster, AggregateCluster):
        clusters.update((child.name, child) for child in cluster.children)


def _service_of(cluster: EdsCluster) -> NamespacedName:
    return cluster.service.namespace, cluster.service.name
