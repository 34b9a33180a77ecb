"""The loop each xDS stream runs: it waits for the next request and for the next cache change
at the same time, feeds whichever comes to its SotwStream or DeltaStream, and writes the
responses in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
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
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.pacing import TokenBucket
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.snapshot_variants import ConfigSources
from dragoman.xds.server.stream_io import ClientGone, RequestReader, Writes, WriteStalled
from dragoman.xds.server.stream_registry import ConnectedStream, StreamRegistry, XdsService
from dragoman.xds.server.wakeup import Wakeup
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
    # Requests answered as part of a later one of their burst (how many), not on their own.
    on_merged: Callable[[ConnectedStream, int], None] | None = None
    # A stream closed because its client read nothing for the stall timeout.
    on_stalled: Callable[[ConnectedStream], None] | None = None


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
        limits: XdsLimits | None = None,
    ) -> None:
        self.cache = cache
        self.limits = limits if limits is not None else XdsLimits()
        self.first_responses = asyncio.Semaphore(self.limits.first_responses_in_flight)
        self.writes = Writes(self.limits.stall_timeout_s)
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
    ) -> None:
        protocol: SotwStream | DeltaStream = (
            DeltaStream(type_url, self.cache.memos)
            if delta
            else SotwStream(type_url, self.cache.memos)
        )
        sources = _config_sources(type_url, delta)
        stream = self.registry.open(service, context.peer(), protocol)
        stream.authenticated, stream.identity = peer_identity(context)
        _call(self.callbacks.on_open, stream)
        wakeup = Wakeup(asyncio.get_running_loop())
        reader: RequestReader | None = None
        self.cache.listen(wakeup.ring)
        try:
            # Nothing is served before the first snapshot: an empty answer would delete config.
            await self.cache.wait_ready()
            reader = RequestReader(context, self.limits.reads_per_second, wakeup.ring)
            seen = self.cache.generation
            answers = TokenBucket(self.limits.request_burst, self.limits.requests_per_second)
            first = True
            while not (reader.ended and not reader.mailbox):
                await self._next_turn(reader, wakeup, seen, answers)
                changed, seen = self.cache.generation != seen, self.cache.generation
                responses: list[Response] = []
                # Requests first: their ACKs and NACKs then refer to what the client has
                # seen; on_request itself pushes a newer snapshot after answering, in ADS
                # order. A change takes the waiting requests along, whatever the rate.
                if reader.mailbox and (changed or answers.take()):
                    responses += await self._answer_waiting(
                        stream, context, reader, sources, wakeup
                    )
                # A change, or what waited for the node's clusters to warm.
                if wakeup.take_warmed() or changed:
                    responses += await self._push(stream, sources)
                self._report_events(stream)
                if not await self._write_all(stream, context, responses, first):
                    return
                first = first and not responses
                responses.clear()  # nothing of it is kept while the stream idles
        finally:
            self.cache.unlisten(wakeup.ring)
            await _cancelled(reader.task if reader is not None else None)
            self._closed(stream)

    async def _next_turn(
        self, reader: RequestReader, wakeup: Wakeup, seen: int, answers: TokenBucket
    ) -> None:
        """Wait for a request that may be answered now, a change, the client's clusters
        warm, or the end of reading."""
        wakeup.rung = False
        if self.cache.generation != seen or wakeup.warmed:
            return
        if reader.mailbox:
            delay = answers.delay()
            if delay:
                # Over the rate: requests keep arriving (merged) until the next answer is due.
                await wakeup.wait(delay)
            return
        if not reader.ended:
            await wakeup.wait()

    async def _answer_waiting(
        self,
        stream: ConnectedStream,
        context: grpc.aio.ServicerContext,
        reader: RequestReader,
        sources: ConfigSources,
        wakeup: Wakeup,
    ) -> list[Response]:
        merged = reader.mailbox.merged_count
        requests = reader.mailbox.take()
        if merged:
            reader.mailbox.merged_count = 0
            _call(self.callbacks.on_merged, stream, merged)
        responses: list[Response] = []
        for request in requests:
            responses += await self._answer(stream, context, request, sources, wakeup)
        return responses

    async def _write_all(
        self,
        stream: ConnectedStream,
        context: grpc.aio.ServicerContext,
        responses: list[Response],
        first: bool,
    ) -> bool:
        """Write `responses` in order; False if the stream is to end (client gone, stalled).

        The first responses of a stream wait for one of a bounded number of slots: clients
        that never read cannot each make gRPC hold a copy of a large first answer."""
        if not responses:
            return True
        if first:
            async with self.first_responses:
                return await self._write_all(stream, context, responses, first=False)
        loop = asyncio.get_running_loop()
        try:
            for response in responses:
                log_push(stream, response)
                await self.writes.write(context, response, loop)
                _call(self.callbacks.on_response, stream, response)
        except ClientGone as error:
            # Normal: the one line is `_closed`'s ("disconnected").
            logger.debug("xDS stream %d: write failed: %s", stream.stream_id, error)
            return False
        except WriteStalled:
            logger.warning(
                "xDS %s %s: closed: the client read nothing for %gs",
                kind(stream),
                describe(stream),
                self.limits.stall_timeout_s,
            )
            _call(self.callbacks.on_stalled, stream)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the client read nothing")
        return True

    def handler(
        self, service: XdsService, type_url: str | None, *, delta: bool
    ) -> Callable[[AsyncIterator[Request], grpc.aio.ServicerContext], Awaitable[None]]:
        async def handle(
            requests: AsyncIterator[Request], context: grpc.aio.ServicerContext
        ) -> None:
            # Requests are read with context.read() (RequestReader), never from `requests`.
            await self.serve(context, service, type_url, delta=delta)

        return handle

    async def _answer(
        self,
        stream: ConnectedStream,
        context: grpc.aio.ServicerContext,
        request: Request,
        sources: ConfigSources,
        wakeup: Wakeup,
    ) -> list[Response]:
        """Admit the node on its first request, then feed the request to the protocol."""
        self.registry.requests += 1
        if stream.identified:
            self.admission.regroup(stream)
        else:
            refusal = self.admission.identify(stream, request)
            if refusal is not None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal.message)
            self.dependent_streams.join(stream, wakeup.warm)  # before its first request
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
        if stream.grpc_client:  # only gRPC clients' groups are made on first use
            await self.cache.prepare(stream.group)
        return self.cache.snapshot_for(stream.group, sources)

    def _report_events(self, stream: ConnectedStream) -> None:
        for event in stream.protocol.take_events():
            log_event(stream, event)
            if isinstance(event, Ack) and stream.service != "ADS":
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


async def _cancelled(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel `tasks` and wait until they end, whatever they raise."""
    for task in tasks:
        if task is not None:
            task.cancel()
    for task in tasks:
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
