"""From stores to served snapshots: each change rebuilds only what it reaches (an incremental
build, the EDS fast path when only EndpointSlices changed, a full build when a Gateway did)
and re-serializes only what changed. Pure apart from handing snapshots to the cache."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.incremental import BuildKind, IncrementalBuild
from dragoman.dag.model import Dag, Problem
from dragoman.dag.options import BuildOptions
from dragoman.envoy.grpc.grpc_snapshots import GrpcSnapshots
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.envoy.translation.translator import Translation, translate_endpoints
from dragoman.snapshots.gc_pause import cyclic_gc_paused
from dragoman.snapshots.resources import Snapshot
from dragoman.store import Store
from dragoman.xds.server.snapshot_cache import SnapshotCache


@dataclass(frozen=True, slots=True)
class UpdateResult:
    kind: BuildKind
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
    # What proxyless gRPC clients get, translated when one first asks.
    grpc: GrpcSnapshots | None = None
    # Told of every build that published something (metrics): keep them quick.
    observers: list[Callable[[UpdateResult], None]] = field(default_factory=list)

    # Made from the options above on first use; each keeps what the last update made.
    builder: IncrementalBuild | None = None
    translation: Translation | None = None

    def prepare(self, store: Store) -> None:
        """Builds and translates `store` without publishing anything: the next update then
        builds and translates only what differs from it. A first load prepares the objects
        parsed so far while a worker process parses the rest. Nothing is kept of a prepare
        that fails (the next update builds everything)."""
        builder, translation = self._builder_and_translation()
        try:
            with cyclic_gc_paused():
                translation.translate(builder.build(store, self.dns).dag)
        except BaseException:
            self.builder = self.translation = None
            raise

    def update(self, store: Store) -> UpdateResult:
        """Build what `store` means for Envoy and publish it if anything changed."""
        started = time.perf_counter()
        previous_dag = self.dag
        builder, translation = self._builder_and_translation()
        with cyclic_gc_paused():
            built = builder.build(store, self.dns)
            kind = built.kind
            if previous_dag is None:
                kind = "full"  # the first published (whatever a prepare built before)
            elif kind == "unchanged":
                self.store = store
                return UpdateResult("unchanged", time.perf_counter() - started, self._problems())
            dag = built.dag
            if built.dns_changed and previous_dag is not None:
                # Only the addresses of names already served changed: their endpoints alone.
                snapshots = translate_endpoints(dag, self.snapshots, options=self.translate_options)
            else:
                snapshots = translation.translate(dag)
        self.grpc = GrpcSnapshots(dag, snapshots, self.translate_options, reuse=self.grpc)
        self.store, self.dag, self.snapshots = store, dag, snapshots
        self.cache.set_snapshots(snapshots, grpc=self.grpc)
        new_problems = _new_problems(previous_dag.problems if previous_dag else (), dag.problems)
        # (A DNS check's DNSResolved conditions; a full or incremental update may always have.)
        statuses_changed = bool(built.dns_changed) and (
            previous_dag is None or dag.statuses != previous_dag.statuses
        )
        result = UpdateResult(
            kind,
            time.perf_counter() - started,
            dag.problems,
            new_problems,
            statuses_changed=statuses_changed,
        )
        for observer in self.observers:
            observer(result)
        return result

    def update_dns(self, dns: DnsObservations) -> UpdateResult:
        """Publish new DNS check observations: a build of the current store with them (when
        only the addresses of names already served changed, as endpoints and route statuses
        alone: the EDS fast path)."""
        started = time.perf_counter()
        if dns == self.dns or self.store is None:
            self.dns = dict(dns)
            return UpdateResult("unchanged", time.perf_counter() - started, self._problems())
        self.dns = dict(dns)
        return self.update(self.store)

    def _builder_and_translation(self) -> tuple[IncrementalBuild, Translation]:
        """The build and translation that keep what the last update (or prepare) made."""
        if self.builder is None or self.translation is None:
            self.builder = IncrementalBuild(self.build_options)
            self.translation = Translation(self.translate_options)
        return self.builder, self.translation

    def _problems(self) -> tuple[Problem, ...]:
        return self.dag.problems if self.dag is not None else ()


def _new_problems(
    previous: tuple[Problem, ...], problems: tuple[Problem, ...]
) -> tuple[Problem, ...]:
    """The problems not among `previous`. Most are the very objects found before (an entry
    not made again keeps its problems): those are known by identity, without hashing each
    one (thousands of routes may have one)."""
    if problems is previous:
        return ()
    held = {id(problem) for problem in previous}
    fresh = [problem for problem in problems if id(problem) not in held]
    if not fresh:
        return ()
    # An equal problem is about the same object: only those are hashed.
    objects = {problem.object for problem in fresh}
    old = {problem for problem in previous if problem.object in objects}
    return tuple(problem for problem in fresh if problem not in old)
