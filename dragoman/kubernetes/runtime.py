"""`dragoman serve --kubernetes`: the API server as the source, xDS to Envoy, status back.

Every replica lists and watches the cluster, builds, and serves xDS; only the elected
leader writes status. xDS is served only once every watched kind has been listed, so an
Envoy never sees a half-built world. EndpointSlice changes go through the controller's
EDS fast path at once; other changes are held off briefly so a burst costs one build.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dragoman.dag.options import DEFAULT_CONTROLLER_NAME, BuildOptions
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.kubernetes.backoff import Backoff
from dragoman.kubernetes.cache import CacheChange, LoopSink, ObjectCache, partition_of
from dragoman.kubernetes.holdoff import Holdoff
from dragoman.kubernetes.informer import Informer, WatchSettings
from dragoman.kubernetes.leader import LeaderElector, LeaseClient, LeaseSettings
from dragoman.kubernetes.provisioning_loop import ProvisioningLoop
from dragoman.kubernetes.status_fallback import ServedGateways, unreadable_statuses
from dragoman.kubernetes.status_writer import PublishResult, StatusClient, StatusWriter
from dragoman.kubernetes.watched_kinds import WATCHED_KINDS, WatchedKind, readable_versions
from dragoman.provisioning.resolve import claim_parameters
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.runtime.controller import Controller, UpdateResult
from dragoman.runtime.debug.view import DebugView, take_view
from dragoman.runtime.dns_checker import AcceptedAnswer, restored_observations
from dragoman.runtime.dns_state import kept_answers, save_answers
from dragoman.runtime.logs import problem_fields
from dragoman.runtime.memory import MemoryTrimmer
from dragoman.runtime.metrics import Metrics
from dragoman.runtime.ops_server import OpsServer
from dragoman.runtime.server_config import NO_DNS_CHECK, DnsCheckSettings
from dragoman.runtime.serving import run_until_signalled, serving_controller, start_serving
from dragoman.security.files import TlsFiles
from dragoman.snapshots.gc_pause import cyclic_gc_paused, settle_for_serving
from dragoman.store import Store
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.stream_registry import StreamRegistry

log = logging.getLogger("dragoman.kubernetes")

# How long shutdown waits, in all, for the informer threads to end.
INFORMERS_JOIN_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class KubernetesConfig:
    xds_address: str
    kubeconfig: Path | None = None
    context: str | None = None
    # Namespaces to watch for namespaced kinds; empty: all of them.
    namespaces: tuple[str, ...] = ()
    # /metrics, /healthz, /readyz and /debug; None: no such server.
    ops_address: str | None = None
    # /debug* for peers off loopback too (by default: loopback only).
    debug_remote: bool = False
    controller_name: str = DEFAULT_CONTROLLER_NAME
    # Serve only Gateways of this GatewayClass (None: every class naming our controller).
    gateway_class: str | None = None
    # None: no leader election, this replica never writes status.
    lease: LeaseSettings | None = None
    build_options: BuildOptions = BuildOptions()
    translate_options: TranslateOptions = TranslateOptions()
    watch: WatchSettings = field(default_factory=WatchSettings)
    kinds: tuple[WatchedKind, ...] = WATCHED_KINDS
    holdoff: float = 0.01
    holdoff_max: float = 0.5
    dns_check: DnsCheckSettings = NO_DNS_CHECK
    # Mutual TLS on the xDS port; None: plaintext, on loopback unless xds_insecure.
    xds_tls: TlsFiles | None = None
    xds_insecure: bool = False
    xds_limits: XdsLimits = field(default_factory=XdsLimits)
    # --provision: each accepted Gateway gets its own Envoys (None: none provisioned).
    provision: ProvisionSettings | None = None
    # Where the DNS check's accepted answers are kept for the next process (None: nowhere).
    # The objects themselves are not kept: the API server is their source.
    state_dir: Path | None = None


def kubernetes_build_options(config: KubernetesConfig) -> BuildOptions:
    """The build options of Kubernetes mode: a Gateway is served only when its GatewayClass
    exists and names our controller; DNS check results are used when the check runs."""
    return dataclasses.replace(
        config.build_options,
        controller_name=config.controller_name,
        require_gateway_class=True,
        dns_check=config.dns_check.enabled,
    )


def only_gateway_class(store: Store, name: str | None) -> Store:
    """The store as the build should see it with `--gateway-class NAME`: GatewayClasses of
    other names are left out, so their Gateways are not ours."""
    if name is None:
        return store
    classes = {key: c for key, c in store.gateway_classes.items() if c.meta.name == name}
    return dataclasses.replace(store, gateway_classes=classes)


@dataclass
class StatusCounters:
    """What the status writer did, summed over its rounds (for logs and tests)."""

    rounds: int = 0
    written: int = 0
    unchanged: int = 0
    conflicts: int = 0
    failed: int = 0

    def add(self, result: PublishResult) -> None:
        self.rounds += 1
        self.written += result.written
        self.unchanged += result.unchanged
        self.conflicts += result.conflicts
        self.failed += result.failed


@dataclass
class _Pending:
    config: bool = False  # something other than endpoints changed: held off
    endpoints: bool = False  # EndpointSlices changed: applied at once
    holdoff: Holdoff = field(default_factory=Holdoff)


class KubernetesServer:
    def __init__(self, config: KubernetesConfig, client: Any = None) -> None:
        if client is None:
            from dragoman.kubernetes.client import api_client

            client = api_client(config.kubeconfig, config.context)
        self.config = config
        self.client = client
        self.cache = ObjectCache()
        self.controller = serving_controller(
            kubernetes_build_options(config), config.translate_options
        )
        self.snapshots = self.controller.cache
        self.informers: list[Informer] = []
        self.serving = False
        self.leading = False
        self.xds_server: Any = None
        self.ops: OpsServer | None = None
        self.streams = StreamRegistry()
        self.metrics = Metrics()
        self.controller.observers.append(self.metrics.built)
        self.metrics.state.controller = self.controller
        self.metrics.state.streams = self.streams
        self.metrics.state.unreadable = self._unreadable
        self.metrics.state.kinds_not_served = lambda: kinds_not_served(self.informers)
        # The unreadable objects and their errors as of the last build, kept as values: the
        # operations server reads them from its own thread, never the changing cache.
        self._source_errors: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self.status = StatusCounters()
        self.updates: list[UpdateResult] = []  # the most recent ones, for logs and tests
        self.elector: LeaderElector | None = None
        status_timeout = 10.0
        if config.lease is not None:
            leases = LeaseClient(client, request_timeout=config.lease.request_timeout)
            self.elector = LeaderElector(leases, config.lease)
            self.metrics.state.leading = lambda: self.leading
            # A write the server applies late must still land within our leadership.
            status_timeout = config.lease.request_timeout
        self._writer = StatusWriter(StatusClient(client, status_timeout), config.controller_name)
        self._served_gateways = ServedGateways()
        self._pending = _Pending(holdoff=Holdoff(config.holdoff, config.holdoff_max))
        self._changed = asyncio.Event()
        self._statuses_due = asyncio.Event()
        self.provisioning: ProvisioningLoop | None = None
        if config.provision is not None:
            self.provisioning = ProvisioningLoop(client, config.provision, watch=config.watch)

    # -------------------------------------------------------------- health checks

    def live(self) -> str:
        dead = [i.name for i in self.informers if not i.is_alive() and not i.stopped]
        return f"informers stopped: {', '.join(dead)}" if dead else ""

    def ready(self) -> str:
        if self.serving:
            return ""
        waiting = [f"{kind}{' in ' + ns if ns else ''}" for kind, ns in self.cache.unsynced()]
        if waiting:
            return "waiting for the first list of: " + ", ".join(waiting)
        return "starting the xDS server"

    def ready_notes(self) -> str:
        """For /readyz: the kinds served from their last state because the API server stopped
        serving them (404), one line each."""
        return not_served_notes(self.informers, time.monotonic())

    def _unreadable(self) -> tuple[str, ...]:
        return self._source_errors[0]

    def debug_view(self) -> DebugView:
        return take_view(self.controller, self.streams, lambda: self._source_errors[1])

    # ------------------------------------------------------------------- running

    async def run(self, stop: asyncio.Event) -> None:
        """Runs until `stop` is set; raises XdsAddressError if xDS cannot be served."""
        loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._statuses_due = asyncio.Event()
        # Set by `stop`, or by a failure here, so that background tasks always end.
        halt = asyncio.Event()
        relay = asyncio.create_task(_relay(stop, halt))
        sink = LoopSink(loop, self.cache, self._on_change)
        self._start_informers(sink)
        tasks: list[asyncio.Task[None]] = [relay]
        try:
            if self.config.ops_address:
                self.ops = OpsServer(
                    self.config.ops_address,
                    live=self.live,
                    ready=self.ready,
                    ready_notes=self.ready_notes,
                    metrics=self.metrics,
                    debug_view=self.debug_view,
                    debug_remote=self.config.debug_remote,
                )
                await self.ops.start()
            if not await self._wait_for_sync(halt):
                return
            dns_answers = await _restore_dns_answers(self.controller, self.config)
            # What the first list and build made is frozen before the cyclic collector runs
            # again: it never scans it (each EndpointSlice change at 10,000 objects did).
            with cyclic_gc_paused():
                self._update()
                settle_for_serving()
            self.xds_server, checking = await start_serving(
                self.controller,
                self.config.xds_address,
                self.config.dns_check,
                halt,
                self._record_update,
                xds_tls=self.config.xds_tls,
                xds_insecure=self.config.xds_insecure,
                xds_limits=self.config.xds_limits,
                metrics=self.metrics,
                streams=self.streams,
                dns_answers=dns_answers,
                on_dns_answers=_kept_in(self.config.state_dir),
            )
            if checking is not None:
                tasks.append(checking)
            # A build, or streams coming, going or asking: large responses were made and freed.
            trimmer = MemoryTrimmer(
                lambda: (self.streams.activity(), id(self.controller.snapshots)),
                release=self.controller.cache.release_bodies,
                closes=lambda: self.streams.closed,
            )
            tasks.append(asyncio.create_task(trimmer.run(halt)))
            self.serving = True
            log.info("serving xDS on %s", self.config.xds_address)
            if self.elector is not None:
                tasks.append(asyncio.create_task(self.elector.run(halt, self._on_leadership)))
            tasks.append(asyncio.create_task(self._publish_statuses(halt)))
            if self.provisioning is not None:
                provisioned = self.provisioning.run(
                    halt, self._provision_source, lambda: self.leading, self._statuses_due.set
                )
                tasks.append(asyncio.create_task(provisioned))
            await self._apply_changes(halt)
        finally:
            halt.set()
            await self._shut_down(tasks)

    def _start_informers(self, sink: LoopSink) -> None:
        self.informers = start_informers(self.client, self.config, sink, self.cache, self.metrics)

    async def _wait_for_sync(self, stop: asyncio.Event) -> bool:
        while not self.cache.synced:
            if stop.is_set():
                return False
            self._changed.clear()
            await _first(stop.wait(), self._changed.wait())
        log.info("every watched kind is listed: %d objects", sum(1 for _ in self.cache.entries()))
        self._pending = _Pending(holdoff=self._pending.holdoff)
        return not stop.is_set()

    async def _apply_changes(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        pending = self._pending
        while not stop.is_set():
            now = loop.time()
            held_off = pending.config and pending.holdoff.due() <= now
            if held_off or (pending.endpoints and not pending.config):
                self._update()
                pending.holdoff.flushed(now, loop.time())  # from taking its input to its end
                pending.config = pending.endpoints = False
                continue
            timeout = pending.holdoff.due() - now if pending.config else None
            self._changed.clear()
            await _first(stop.wait(), self._changed.wait(), timeout=timeout)

    def _on_change(self, change: CacheChange) -> None:
        if change.objects:
            if change.kind == "EndpointSlice":
                self._pending.endpoints = True
            else:
                self._pending.config = True
                self._pending.holdoff.changed(asyncio.get_running_loop().time())
        if change.statuses:
            self._statuses_due.set()
        if change.any:
            self._changed.set()

    def _provision_source(self) -> tuple[Store, Any]:
        store = only_gateway_class(self.cache.store(), self.config.gateway_class)
        return store, self.controller.dag

    def _update(self) -> None:
        store = only_gateway_class(self.cache.store(), self.config.gateway_class)
        if self.provisioning is not None:
            store = claim_parameters(store)  # EnvoyProxyParameters are provisioning's
        try:
            result = self.controller.update(store)
        except Exception:  # a bug must not stop serving the last good snapshot
            log.exception("build failed; still serving the previous configuration")
            return
        self._record_update(result)
        if result.kind != "unchanged":
            log.info(
                "%s update in %.1f ms (%d problems)",
                result.kind,
                result.seconds * 1000,
                len(result.problems),
            )

    def _record_update(self, result: UpdateResult) -> None:
        """After every rebuild, also the DNS check's when a name resolved differently."""
        self.updates = [*self.updates[-99:], result]
        self._source_errors = (
            tuple(sorted(str(entry.key) for entry in self.cache.unreadable())),
            tuple(sorted(str(error) for error in self.cache.errors())),
        )
        for problem in result.new_problems:
            log.warning("%s", problem, extra=problem_fields(problem))
        # Endpoints alone change no status, unless the DNS check's changed DNSResolved.
        if result.kind in ("full", "incremental") or result.statuses_changed:
            self._remember_served()
            self._statuses_due.set()
            if self.provisioning is not None:
                self.provisioning.due.set()

    # -------------------------------------------------------------------- status

    def _remember_served(self) -> None:
        """Every replica remembers the Gateway statuses it computed, so whichever leads
        later can hand back a Gateway that is no longer dragoman's."""
        if self.controller.dag is not None:
            self._served_gateways.remember(self.controller.dag.statuses)

    def _on_leadership(self, leading: bool) -> None:
        self.leading = leading
        if leading:
            self._statuses_due.set()  # a new leader publishes everything it computed
            if self.provisioning is not None:
                self.provisioning.due.set()  # and provisions every Gateway

    def still_leading(self) -> bool:
        """Asked by the status writer's thread before each write: the elector's own
        deadline, which does not wait for the loop to notice that it has passed."""
        return self.leading and self.elector is not None and self.elector.leading_now()

    async def _publish_statuses(self, stop: asyncio.Event) -> None:
        retry = Backoff(initial=1.0, maximum=30.0)
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            await _first(stop.wait(), self._statuses_due.wait())
            self._statuses_due.clear()
            if stop.is_set() or not self.leading or self.controller.dag is None:
                continue
            desired = dict(self.controller.dag.statuses)
            if self.provisioning is not None:
                desired = self.provisioning.with_outcomes(desired)
            cached = self.cache.by_key()
            desired.update(
                unreadable_statuses(self.cache.unreadable(), desired, self.config.controller_name)
            )
            released = self._served_gateways.released(desired, cached)
            result = await asyncio.to_thread(
                self._writer.publish, desired, cached, self.still_leading, released
            )
            self.status.add(result)
            self.metrics.status_written(
                result.written, result.unchanged, result.conflicts, result.failed
            )
            if result.written or result.failed:
                log.info(
                    "status: %d written, %d unchanged, %d conflicts retried, %d failed",
                    result.written,
                    result.unchanged,
                    result.conflicts,
                    result.failed,
                )
            if result.failed:
                loop.call_later(retry.next(), self._statuses_due.set)
            else:
                retry.reset()

    # ------------------------------------------------------------------ shutdown

    async def _shut_down(self, tasks: list[asyncio.Task[None]]) -> None:
        self.leading = False  # a status round in progress stops at its next object
        for informer in self.informers:
            informer.request_stop()
        # The elector's task releases the Lease on its way out: let it finish.
        for task in tasks:
            try:
                await asyncio.wait_for(task, 6.0)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
            except Exception:
                log.exception("background task failed")
        if self.xds_server is not None:
            await self.xds_server.stop(grace=1.0)
            self.xds_server = None
        self.serving = False
        if self.ops is not None:
            await self.ops.stop()
            self.ops = None
        await asyncio.to_thread(join_all, self.informers, INFORMERS_JOIN_TIMEOUT)
        log.info("stopped")


def start_informers(
    client: Any, config: KubernetesConfig, sink: LoopSink, cache: ObjectCache, metrics: Metrics
) -> list[Informer]:
    """An informer per watched kind (and namespace, with --namespace), each started."""
    informers = []
    for kind in config.kinds:
        versions = readable_versions(kind)
        if not versions:
            log.debug("not watching %s: the parser does not read it yet", kind.kind)
            continue
        namespaces: tuple[str | None, ...] = (None,)
        if kind.namespaced and config.namespaces:
            namespaces = config.namespaces
        for namespace in namespaces:
            informer = Informer(
                client,
                kind,
                versions,
                namespace,
                sink,
                config.watch,
                on_restart=metrics.watch_restarted,
                on_silent=metrics.watch_silent,
            )
            cache.expect(partition_of(informer))
            informers.append(informer)
    log.info("watching %s", ", ".join(i.name for i in informers))
    for informer in informers:
        informer.start()
    return informers


async def _restore_dns_answers(
    controller: Controller, config: KubernetesConfig
) -> dict[str, AcceptedAnswer]:
    """What the previous process's DNS check accepted, still within its grace, made what the
    first build serves (the checks start with xDS, and may be slow while DNS is down)."""
    answers = await asyncio.to_thread(kept_answers, config.state_dir, config.dns_check)
    controller.dns = restored_observations(answers)
    return answers


def _kept_in(
    state_dir: Path | None,
) -> Callable[[Mapping[str, AcceptedAnswer]], None] | None:
    """Where the DNS check's accepted answers are kept as they change (None: nowhere)."""
    return functools.partial(save_answers, state_dir) if state_dir is not None else None


def not_served_notes(informers: list[Informer], now: float) -> str:
    """One line for each informer whose collection the API server stopped serving."""
    return "\n".join(
        f"{informer.name}: not served by the API server for {now - since:.0f} s;"
        " serving its last state"
        for informer in informers
        if (since := informer.not_served_since) is not None
    )


def kinds_not_served(informers: list[Informer]) -> dict[str, bool]:
    """Each watched kind, and whether the API server stopped serving it (in any namespace
    watched) since it was listed."""
    kinds: dict[str, bool] = {}
    for informer in informers:
        missing = informer.not_served_since is not None
        kinds[informer.kind.kind] = kinds.get(informer.kind.kind, False) or missing
    return kinds


def join_all(informers: list[Informer], timeout: float) -> list[Informer]:
    """Waits for the informers' threads (already asked to stop) to end, all at once, for at
    most `timeout` in all; returns those still running."""
    deadline = time.monotonic() + timeout
    for informer in informers:
        informer.join(max(0.0, deadline - time.monotonic()))
    running = [informer for informer in informers if informer.is_alive()]
    if running:
        log.warning("informers still running at exit: %s", ", ".join(i.name for i in running))
    return running


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


async def _first(*waits: Any, timeout: float | None = None) -> None:
    """Waits until the first of several awaitables is done (or `timeout` passes)."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def serve_kubernetes(config: KubernetesConfig) -> None:
    await run_until_signalled(KubernetesServer(config).run)
