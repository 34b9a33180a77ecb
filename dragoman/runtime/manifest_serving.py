"""`dragoman serve`: watch a manifest directory and serve what it means over xDS."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.dag.options import BuildOptions
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.objects import KubeObject
from dragoman.runtime.controller import UpdateResult
from dragoman.runtime.debug.view import DebugView, take_view
from dragoman.runtime.logs import problem_fields
from dragoman.runtime.memory import MemoryTrimmer
from dragoman.runtime.server_config import NO_DNS_CHECK, DnsCheckSettings
from dragoman.runtime.serving import run_until_signalled, serving_controller, start_serving
from dragoman.security.files import TlsFiles
from dragoman.snapshots.gc_pause import cyclic_gc_paused, settle_for_serving
from dragoman.sources.errors import SourceError
from dragoman.sources.last_good import LastGoodFiles
from dragoman.sources.manifests import LoadResult, ManifestDirectory
from dragoman.sources.watch import watch_directory
from dragoman.store import Store
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.stream_registry import StreamRegistry

if TYPE_CHECKING:
    from dragoman.runtime.dns_checker import AcceptedAnswer
    from dragoman.runtime.metrics import Metrics
    from dragoman.runtime.ops_server import OpsServer
    from dragoman.sources.parse_worker import ParseWorker

log = logging.getLogger("dragoman.runtime.manifest_serving")


@dataclass(frozen=True, slots=True)
class ServeConfig:
    manifests: Path
    xds_address: str
    build_options: BuildOptions = BuildOptions()
    translate_options: TranslateOptions = TranslateOptions()
    dns_check: DnsCheckSettings = NO_DNS_CHECK
    # Mutual TLS on the xDS port; None: plaintext, on loopback unless xds_insecure.
    xds_tls: TlsFiles | None = None
    xds_insecure: bool = False
    xds_limits: XdsLimits = field(default_factory=XdsLimits)
    # /metrics, /healthz, /readyz and /debug; None: no such server.
    ops_address: str | None = None
    # /debug* for peers off loopback too (by default: loopback only).
    debug_remote: bool = False
    # Where what was served is kept for the next process (the last good version of each
    # file); None: nowhere, a restart serves what the files hold then.
    state_dir: Path | None = None


class ManifestServer:
    """Reloads the directory on change and feeds the controller; logs each error once."""

    def __init__(self, config: ServeConfig, parse_worker: ParseWorker | None = None) -> None:
        self.config = config
        self.last_good = LastGoodFiles(config.state_dir) if config.state_dir else None
        self.directory = ManifestDirectory(
            config.manifests, last_good=self.last_good, parse_worker=parse_worker
        )
        # The build uses DNS check results exactly when the check runs.
        build_options = dataclasses.replace(
            config.build_options, dns_check=config.dns_check.enabled
        )
        self.controller = serving_controller(build_options, config.translate_options)
        self.cache = self.controller.cache
        self._reported: set[SourceError] = set()
        self.streams = StreamRegistry()
        # Metrics exist to be scraped: without the operations server nothing is counted, and
        # prometheus_client (and the package metadata its build_info reads) stays unloaded.
        self.metrics: Metrics | None = None
        if config.ops_address is not None:
            from dragoman.runtime.metrics import Metrics

            self.metrics = Metrics()
            self.controller.observers.append(self.metrics.built)
            self.metrics.state.controller = self.controller
            self.metrics.state.streams = self.streams
            self.metrics.state.unreadable = self._unreadable
            self.metrics.state.unreadable_files = self.directory.unreadable
        self.serving = False
        self.ops: OpsServer | None = None
        # The objects of the last load applied (and its number), and the store made of them.
        self._objects: Sequence[KubeObject] = ()
        self._generation = 0
        self._store: Store | None = None
        # Whether the first load may still build its objects as they come (until that fails).
        self._preparing = True

    def ready(self) -> str:
        """ "" once the first build is served over xDS, else why not yet."""
        if self.serving:
            return ""
        return "waiting for the first build" if self.controller.dag is None else "starting xDS"

    def _unreadable(self) -> list[str]:
        return sorted({error.object or error.origin for error in self._reported})

    def debug_view(self) -> DebugView:
        return take_view(self.controller, self.streams, lambda: sorted(map(str, self._reported)))

    async def start_ops(self) -> None:
        """The operations HTTP server, before anything is built (/readyz says so)."""
        if self.ops is None and self.config.ops_address is not None:
            from dragoman.runtime.ops_server import OpsServer

            assert self.metrics is not None  # made with the operations address
            ops = OpsServer(
                self.config.ops_address,
                live=lambda: "",
                ready=self.ready,
                metrics=self.metrics,
                debug_view=self.debug_view,
                debug_remote=self.config.debug_remote,
            )
            await ops.start()
            self.ops = ops

    async def reload(self, changed: Collection[str] | None = None) -> None:
        """Loads the directory (only the `changed` files when given) and publishes what it
        means; nothing is built when no file's content changed. Decoding and parsing grow
        with what the files hold: they run off the event loop, so every xDS stream keeps
        being served while a large (or hostile) file is read."""
        result = await asyncio.to_thread(self._load, changed)
        if not result.changed:
            return
        self._apply(result)

    def _load(self, changed: Collection[str] | None) -> LoadResult:
        # The first load, shared with a worker process, builds what is parsed so far while
        # the worker parses the rest: its build then has only the last part left to do.
        first = self.controller.dag is None and changed is None
        with cyclic_gc_paused():  # parsing allocates many acyclic values
            return self.directory.load(changed, self._prepare if first else None)

    def _prepare(self, objects: Iterable[KubeObject]) -> None:
        if self._preparing:
            try:
                self.controller.prepare(Store.from_objects(objects))
            except Exception:  # a bug: the first update builds everything
                self._preparing = False
                log.exception("building the first load's objects as they came failed")

    def _apply(self, result: LoadResult) -> None:
        errors = set(result.errors)
        for error in sorted(errors - self._reported, key=str):
            log.error("%s", error)
        for error in sorted(self._reported - errors, key=str):
            log.info("resolved: %s", error)
        self._reported = errors
        # Every step kept until the build has compared: each refers to the last weakly.
        delta = result.delta
        if (
            self._store is not None
            and delta is not None
            and delta.since == self._generation
            and len(delta.removed) + len(delta.added) <= STEP_OBJECTS_UP_TO
        ):
            # The load says what it took out and put in: no object compared.
            steps = stepped_stores(self._store, delta.removed, delta.added)
        else:
            steps = updated_stores(self._store, self._objects, result.objects)
        store = steps[-1]
        self._store, self._objects, self._generation = store, result.objects, result.generation
        update = self.controller.update(store)
        _log_new_problems(update)
        if update.kind != "unchanged":
            log.info(
                "%s update from %d files, %d objects in %.1f ms (%d errors, %d problems)",
                update.kind,
                result.files,
                len(result.objects),
                update.seconds * 1000,
                len(errors),
                len(update.problems),
            )

    async def run(self, stop: asyncio.Event) -> None:
        await self.start_ops()
        try:
            await self._serve(stop)
        finally:
            self.serving = False
            if self.ops is not None:
                await self.ops.stop()
                self.ops = None

    async def _serve(self, stop: asyncio.Event) -> None:
        dns_answers = await asyncio.to_thread(self._kept_dns_answers)
        # What the first load and build make lives as long as the process: the cyclic
        # collector does not scan it while it is made (each full collection would go over
        # all of it again), nor on any later collection (frozen).
        with cyclic_gc_paused():
            await self.reload()
            # Frozen before the collector is enabled again: its first collection would
            # otherwise scan everything the load and build made (0.1 s at 10,000 Services).
            settle_for_serving()
        server, checking = await start_serving(
            self.controller,
            self.config.xds_address,
            self.config.dns_check,
            stop,
            on_dns_update=_log_new_problems,  # a name failing its check is a new problem
            xds_tls=self.config.xds_tls,
            xds_insecure=self.config.xds_insecure,
            xds_limits=self.config.xds_limits,
            metrics=self.metrics,
            streams=self.streams,
            dns_answers=dns_answers,
            on_dns_answers=self._keep_dns_answers if self.config.state_dir else None,
        )
        self.serving = True
        log.info("serving xDS on %s from %s", self.config.xds_address, self.config.manifests)
        # A build, or streams coming, going or asking: large responses were made and freed.
        trimmer = MemoryTrimmer(
            lambda: (self.streams.activity(), id(self.controller.snapshots)),
            release=self.cache.release_bodies,
            closes=lambda: self.streams.closed,
        )
        trimming = asyncio.create_task(trimmer.run(stop))
        try:
            await watch_directory(
                self.config.manifests,
                self._on_change,
                stop,
                # What changed since the first load (while xDS started) is reported at once.
                baseline=self.directory.stamps(),
                recheck=self.directory.unreadable,
            )
        finally:
            trimming.cancel()
            await asyncio.gather(trimming, return_exceptions=True)
            if checking is not None:
                checking.cancel()
                await asyncio.gather(checking, return_exceptions=True)
            await server.stop(grace=1.0)
            if self.last_good is not None:
                await asyncio.to_thread(self.last_good.close)  # what is kept is on disk
            log.info("stopped")

    def _kept_dns_answers(self) -> dict[str, AcceptedAnswer]:
        """The DNS answers the previous process accepted, still within their grace: the
        first build serves them (the checks start at once, and may be slow)."""
        if self.config.state_dir is None or not self.config.dns_check.enabled:
            return {}  # and the DNS modules stay unloaded
        from dragoman.runtime.dns_checker import restored_observations
        from dragoman.runtime.dns_state import kept_answers

        answers = kept_answers(self.config.state_dir, self.config.dns_check)
        self.controller.dns = restored_observations(answers)
        return answers

    def _keep_dns_answers(self, answers: Mapping[str, AcceptedAnswer]) -> None:
        from dragoman.runtime.dns_state import save_answers

        assert self.config.state_dir is not None  # told only with a state directory
        save_answers(self.config.state_dir, answers)

    async def _on_change(self, changed: frozenset[str]) -> None:
        try:
            await self.reload(changed)
        except Exception:  # a bug must not stop serving the last good snapshot
            log.exception(
                "reload of %s failed; still serving the previous configuration",
                self.config.manifests,
            )


# At most this many objects added or removed by one load are put into the previous store one
# by one (each step copies one kind's mapping); more make a store anew.
STEP_OBJECTS_UP_TO = 16


def updated_stores(
    store: Store | None, before: Sequence[KubeObject], objects: Sequence[KubeObject]
) -> list[Store]:
    """The store of `objects` (the last of the list), given `store`, the store of `before`:
    when few objects differ, `store` with them put in or taken out one at a time, each step
    in the list (a store names the one it was made from weakly: while the steps live, the
    build compares the objects put alone, not every object of every kind); else a store
    made anew. A load keeps the objects of files it did not read again: the same objects."""
    if store is None:
        return [Store.from_objects(objects)]
    held = set(map(id, before))
    added = [obj for obj in objects if id(obj) not in held]
    if len(added) > STEP_OBJECTS_UP_TO:
        return [Store.from_objects(objects)]
    now = set(map(id, objects))
    removed = [obj for obj in before if id(obj) not in now]
    if len(added) + len(removed) > STEP_OBJECTS_UP_TO:
        return [Store.from_objects(objects)]
    return stepped_stores(store, removed, added)


def stepped_stores(
    store: Store, removed: Sequence[KubeObject], added: Sequence[KubeObject]
) -> list[Store]:
    """`store` with the objects `removed` taken out and `added` put in, a step per object (see
    updated_stores)."""
    steps = [store]
    put = {(type(obj), obj.meta.namespace, obj.meta.name) for obj in added}
    for obj in removed:
        if (type(obj), obj.meta.namespace, obj.meta.name) not in put:  # else replaced below
            steps.append(
                steps[-1].with_object(type(obj), (obj.meta.namespace, obj.meta.name), None)
            )
    for obj in added:
        steps.append(steps[-1].with_object(type(obj), (obj.meta.namespace, obj.meta.name), obj))
    return steps


def _log_new_problems(update: UpdateResult) -> None:
    for problem in update.new_problems:
        log.warning("%s", problem, extra=problem_fields(problem))


async def serve(config: ServeConfig, parse_worker: ParseWorker | None = None) -> None:
    """Serves until a signal; `parse_worker`: one already parsing the directory, for the
    first load to share."""
    await run_until_signalled(ManifestServer(config, parse_worker).run)
