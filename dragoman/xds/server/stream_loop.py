"""The loop each xDS stream runs: it waits for the next request and for the next cache change
at the same time, feeds whichever comes to its SotwStream or DeltaStream, and writes the
responses in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.log_text import quoted
from dragoman.snapshots.resources import Snapshot
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.events import Ack, Nack, StreamError, StreamEvent
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.wire import Response
from dragoman.xds.server import dependent_streams
from dragoman.xds.server.admission import Admission
from dragoman.xds.server.event_log import describe, kind, log_event, log_push
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.snapshot_variants import ConfigSources
from dragoman.xds.server.stream_registry import ConnectedStream, StreamRegistry, XdsService
from dragoman.xds.transport.peer_identity import peer_identity

logger = logging.getLogger("dragoman.xds")

Request: TypeAlias = DiscoveryRequest | DeltaDiscoveryRequest


@dataclass(frozen=True, slots=True)
class XdsCallbacks:
    """Optional hooks, called inline on the event loop (keep them quick; exceptions are logged).

    For metrics, tests and benchmarks: `on_event` sees every ACK, NACK and ignored request.
    """

    on_open: Callable[[ConnectedStream], None] | None = None
    on_close: Callable[[ConnectedStream], None] | None = None
    on_event: Callable[[ConnectedStream, StreamEvent], None] | None = None
    on_response: Callable[[ConnectedStream, Response], None] | None = None


def _call(hook: Callable[..., None] | None, *args: Any) -> None:
    if hook is None:
        return
    try:
        hook(*args)
    except Exception:
        logger.exception("xDS callback %r failed", hook)


class XdsStreams:
    """Runs every xDS stream of a server against one cache, recording them in a registry."""

    def __init__(
        self,
        cache: SnapshotCache,
        registry: StreamRegistry,
        callbacks: XdsCallbacks | None = None,
        dependent_stream_timeout_s: float = dependent_streams.DEFAULT_TIMEOUT_S,
    ) -> None:
        self.cache = cache
        self.registry = registry
        self.callbacks = callbacks if callbacks is not None else XdsCallbacks()
        self.admission = Admission(cache)
        self.dependent_streams = dependent_streams.DependentStreamWatch(
            registry, lambda: cache.per_type_cluster_name or "?", dependent_stream_timeout_s
        )

    async def serve(
        self,
        context: grpc.aio.ServicerContext,
        service: XdsService,
        type_url: str | None,
        *,
        delta: bool,
    ) -> AsyncIterator[Response]:
        protocol: SotwStream | DeltaStream = (
            DeltaStream(type_url, self.cache.memos)
            if delta
            else SotwStream(type_url, self.cache.memos)
        )
        sources = _config_sources(type_url, delta)
        stream = self.registry.open(service, context.peer(), protocol)
        stream.authenticated, stream.identity = peer_identity(context)
        _call(self.callbacks.on_open, stream)
        reading: asyncio.Task[Request | None] | None = None
        waiting: asyncio.Task[int] | None = None
        # Set when the client's clusters are warm for what this stream holds, or the routes
        # replaced for the removals it holds.
        woken: asyncio.Event | None = None
        waking: asyncio.Task[Any] | None = None
        try:
            # Nothing is served before the first snapshot: an empty answer would delete config.
            await self.cache.wait_ready()
            reading = _read_next(context)
            waiting = self._wait_for_change(self.cache.generation)
            while True:
                if waking is None and woken is not None and _may_be_woken(stream, woken):
                    waking = asyncio.create_task(woken.wait(), name="dragoman-xds-woken")
                tasks = (reading, waiting) if waking is None else (reading, waiting, waking)
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                responses: list[Response] = []
                # A request first: its ACK or NACK then refers to what the client has seen;
                # on_request itself pushes a newer snapshot after answering, in ADS order.
                if reading.done():
                    request = _request_or_none(reading)
                    if request is None:
                        return  # the client closed its side, or went away
                    reading = _read_next(context)
                    responses += await self._answer(stream, context, request, sources)
                    if woken is None and stream.identified:
                        woken = self.dependent_streams.join(stream)  # joined by _answer
                    # Not kept while the stream idles: a SotW EDS request names every CLA.
                    request = None
                push = waiting.done()
                if push:
                    waiting = self._wait_for_change(waiting.result())
                if waking is not None and waking.done() and woken is not None:
                    waking = None
                    woken.clear()
                    push = True  # what waited for the node's clusters to warm
                if push:
                    responses += await self._push(stream, sources)
                self._report_events(stream)
                for response in responses:
                    log_push(stream, response)
                    _call(self.callbacks.on_response, stream, response)
                    yield response
                responses.clear()  # nothing of it is kept while the stream idles
        finally:
            await _cancelled(reading, waiting, waking)
            self._closed(stream)

    def handler(
        self, service: XdsService, type_url: str | None, *, delta: bool
    ) -> Callable[[AsyncIterator[Request], grpc.aio.ServicerContext], AsyncIterator[Response]]:
        async def handle(
            requests: AsyncIterator[Request], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Response]:
            # Requests are read with context.read() (see _read_next), never from `requests`.
            async for response in self.serve(context, service, type_url, delta=delta):
                yield response

        return handle

    async def _answer(
        self,
        stream: ConnectedStream,
        context: grpc.aio.ServicerContext,
        request: Request,
        sources: ConfigSources,
    ) -> list[Response]:
        """Admit the node on its first request, then feed the request to the protocol."""
        self.registry.requests += 1
        if stream.identified:
            self.admission.regroup(stream)
        else:
            refusal = self.admission.identify(stream, request)
            if refusal is not None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal.message)
            self.dependent_streams.join(stream)  # before its first request is fed
        snapshot = await self._snapshot(stream, sources)
        try:
            return _feed(stream.protocol, request, snapshot)
        except StreamError as error:
            logger.warning("xDS stream %s: %s", describe(stream), quoted(str(error)))
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
            raise  # abort raises; this keeps type checkers and readers sure of it

    async def _push(self, stream: ConnectedStream, sources: ConfigSources) -> list[Response]:
        """What a cache change brings an admitted stream."""
        if not stream.identified:
            return []
        self.admission.regroup(stream)
        snapshot = await self._snapshot(stream, sources)
        return list(stream.protocol.on_snapshot(snapshot))

    async def _snapshot(self, stream: ConnectedStream, sources: ConfigSources) -> Snapshot:
        """The stream's snapshot, made off the event loop if it has to be made (gRPC)."""
        await self.cache.prepare(stream.group)
        return self.cache.snapshot_for(stream.group, sources)

    def _wait_for_change(self, generation: int) -> asyncio.Task[int]:
        return asyncio.create_task(
            self.cache.wait_for_change(generation), name="dragoman-xds-wait-change"
        )

    def _report_events(self, stream: ConnectedStream) -> None:
        for event in stream.protocol.take_events():
            log_event(stream, event)
            if isinstance(event, Ack):
                snapshot = self.cache.snapshot_for(stream.group)
                self.dependent_streams.on_ack(stream, event.type_url, snapshot)
            elif isinstance(event, Nack):
                self.dependent_streams.on_nack(stream, event.message)
            _call(self.callbacks.on_event, stream, event)

    def _closed(self, stream: ConnectedStream) -> None:
        self.registry.close(stream)
        self.dependent_streams.forget(stream)
        _call(self.callbacks.on_close, stream)
        if stream.identified:
            logger.info(
                "xDS %s disconnected: %s",
                kind(stream),
                describe(stream),
                extra={"node": stream.node_id},
            )


def _feed(
    protocol: SotwStream | DeltaStream, request: Request, snapshot: Snapshot
) -> list[Response]:
    if isinstance(protocol, DeltaStream):
        assert isinstance(request, DeltaDiscoveryRequest)
        return list(protocol.on_request(request, snapshot))
    assert isinstance(request, DiscoveryRequest)
    return list(protocol.on_request(request, snapshot))


def _config_sources(type_url: str | None, delta: bool) -> ConfigSources:
    if type_url is None:
        return ConfigSources.ADS
    return ConfigSources.PER_TYPE_DELTA if delta else ConfigSources.PER_TYPE_SOTW


def _read_next(context: grpc.aio.ServicerContext) -> asyncio.Task[Request | None]:
    """Read with `context.read()`, not the request iterator, whose generator holds on to the
    last request while it waits for the next: a SotW EDS request names every CLA, and an
    idle stream would keep its decoded copy for as long as it is open."""

    async def next_request() -> Request | None:
        message = await context.read()
        return None if message is grpc.aio.EOF else message

    return asyncio.create_task(next_request(), name="dragoman-xds-read")


def _may_be_woken(stream: ConnectedStream, woken: asyncio.Event) -> bool:
    """Whether to wait for `woken` (a task per idle stream costs memory: only while some
    update of the client waits)."""
    warmth = stream.protocol.warmth
    return woken.is_set() or warmth.waiting or warmth.removals_waiting


def _request_or_none(reading: asyncio.Task[Request | None]) -> Request | None:
    """The request read, or None when the stream has no more (closed, reset, cancelled)."""
    if reading.cancelled():
        return None
    error = reading.exception()
    if error is None:
        return reading.result()
    logger.debug("xDS stream read ended: %r", error)
    return None


async def _cancelled(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel `tasks` and wait until they end, whatever they raise."""
    for task in tasks:
        if task is not None:
            task.cancel()
    for task in tasks:
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
