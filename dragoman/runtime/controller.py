"""From stores to served snapshots: each change rebuilds only what it reaches (an incremental
build, the EDS fast path when only EndpointSlices changed, a full build when a Gateway did)
and re-serializes only what changed. Pure apart from handing snapshots to the cache."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dragoman.dag.dns_check import DnsObservations, dns_refusal, served_addresses
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.model import Dag, Problem
from dragoman.dag.options import BuildOptions
from dragoman.dag.status.route_upstreams import with_dns_conditions
from dragoman.dag.upstreams.endpoints import checked_assignment, checked_clusters
from dragoman.envoy.grpc.grpc_snapshots import GrpcSnapshots
from dragoman.envoy.grpc.grpc_updates import grpc_snapshots
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.envoy.translation.translator import Translation, translate_endpoints
from dragoman.snapshots.gc_pause import cyclic_gc_paused
from dragoman.snapshots.resources import Snapshot
from dragoman.store import Store
from dragoman.xds.server.snapshot_cache import SnapshotCache


@dataclass(frozen=True, slots=True)
class UpdateResult:
    kind: str  # "full", "incremental", "endpoints" or "unchanged"
    seconds: float
    problems: tuple[Problem, ...] = ()
    new_problems: tuple[Problem, ...] = ()
    # An endpoints-only update that changed object statuses (a DNS check's DNSResolved); a
    # full or incremental update may always have.
    statuses_changed: bool = False


@dataclass
class Controller:
    cache: SnapshotCache
    build_options: BuildOptions = field(default_factory=BuildOptions)
    translate_options: TranslateOptions = field(default_factory=TranslateOptions)
    store: Store | None = None
    dag: Dag | None = None
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    # The DNS check's latest observations, an input of every build.
    dns: DnsObservations = field(default_factory=dict)
    # What proxyless gRPC clients get, made when one first asks.
    grpc: GrpcSnapshots | None = None
    # Told of every build that published something (metrics): keep them quick.
    observers: list[Callable[[UpdateResult], None]] = field(default_factory=list)

    # Made from the options above on first use; each keeps what the last update made.
    builder: IncrementalBuild | None = None
    translation: Translation | None = None

    def update(self, store: Store) -> UpdateResult:
        """Build what `store` means for Envoy and publish it if anything changed."""
        started = time.perf_counter()
        previous_store, previous_dag = self.store, self.dag
        if self.builder is None or self.translation is None:
            self.builder = IncrementalBuild(self.build_options)
            self.translation = Translation(self.translate_options)
        with cyclic_gc_paused():
            built = self.builder.build(store, self.dns)
            if built.kind == "unchanged":
                self.store = store
                return UpdateResult("unchanged", time.perf_counter() - started, self._problems())
            dag = built.dag
            snapshots = self.translation.translate(dag)
        self.grpc = grpc_snapshots(
            dag,
            snapshots,
            store,
            build_options=self.build_options,
            translate_options=self.translate_options,
            dns=self.dns,
            previous=self.grpc,
            previous_store=previous_store if built.kind == "endpoints" else None,
        )
        self.store, self.dag, self.snapshots = store, dag, snapshots
        self.cache.set_snapshots(snapshots, grpc=self.grpc)
        old = set(previous_dag.problems) if previous_dag is not None else set()
        new_problems = tuple(p for p in dag.problems if p not in old)
        result = UpdateResult(built.kind, time.perf_counter() - started, dag.problems, new_problems)
        for observer in self.observers:
            observer(result)
        return result

    def update_dns(self, dns: DnsObservations) -> UpdateResult:
        """Publish new DNS check observations: when only the addresses (or the condition) of
        names already served changed, as endpoints and route statuses alone (the EDS fast
        path); else by a build of the current store."""
        started = time.perf_counter()
        if dns == self.dns or self.store is None:
            self.dns = dict(dns)
            return UpdateResult("unchanged", time.perf_counter() - started, self._problems())
        changed = {n for n in dns.keys() | self.dns.keys() if dns.get(n) != self.dns.get(n)}
        if self.dag is not None and self._served_before_and_after(changed, dns):
            statuses_changed = self._update_dns_endpoints(dns, changed)
            result = UpdateResult(
                "endpoints",
                time.perf_counter() - started,
                self._problems(),
                statuses_changed=statuses_changed,
            )
            for observer in self.observers:
                observer(result)
            return result
        self.dns = dict(dns)
        return self.update(self.store)  # other observations: a build of the same store

    def _served_before_and_after(self, changed: set[str], dns: DnsObservations) -> bool:
        """True when every changed name had a cluster and keeps it: no build needed."""
        if not self.build_options.dns_check:
            return False
        policy = self.build_options.external_names
        return all(
            dns_refusal(name, self.dns.get(name), policy) is None
            and dns_refusal(name, dns.get(name), policy) is None
            for name in changed
        )

    def _update_dns_endpoints(self, dns: DnsObservations, changed: set[str]) -> bool:
        """Endpoints and route statuses from new observations; True if statuses changed.

        The incremental builder sees other observations at its next build and rebuilds the
        routes forwarding to those names, so what it keeps never disagrees with what is
        served."""
        dag, store = self.dag, self.store
        assert dag is not None and store is not None
        policy = self.build_options.external_names
        self.dns = dict(dns)
        assignments = dict(dag.load_assignments)
        for value in checked_clusters(dag.clusters):
            if value.hostname in changed:
                served = served_addresses(value.hostname, dns.get(value.hostname), policy)
                assignments[value.name] = checked_assignment(
                    value, served, self.build_options.dns_lookup_family
                )
        statuses = with_dns_conditions(dag.statuses, dag.dns_routes, dns, policy, changed)
        statuses_changed = statuses != dag.statuses
        dag = dataclasses.replace(dag, load_assignments=assignments, statuses=statuses)
        snapshots = translate_endpoints(dag, self.snapshots, options=self.translate_options)
        self.grpc = grpc_snapshots(
            dag,
            snapshots,
            store,
            build_options=self.build_options,
            translate_options=self.translate_options,
            dns=self.dns,
            previous=self.grpc,
            dns_changed=changed,
        )
        self.dag, self.snapshots = dag, snapshots
        self.cache.set_snapshots(snapshots, grpc=self.grpc)
        return statuses_changed

    def _problems(self) -> tuple[Problem, ...]:
        return self.dag.problems if self.dag is not None else ()
