"""The gRPC shell around SotwStream: ADS and the per-type SotW services, on grpc.aio.

Each stream runs one loop that waits for the next request and for the next cache change
at the same time, feeds whichever comes to its SotwStream, and writes the responses in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator

import grpc
from envoy.service.cluster.v3 import cds_pb2_grpc
from envoy.service.discovery.v3 import ads_pb2_grpc
from envoy.service.discovery.v3.discovery_pb2 import (
    DiscoveryRequest,
    DiscoveryResponse,
)
from envoy.service.endpoint.v3 import eds_pb2_grpc
from envoy.service.listener.v3 import lds_pb2_grpc
from envoy.service.route.v3 import rds_pb2_grpc

from dragoman.xds.cache import SnapshotCache
from dragoman.xds.registry import ConnectedStream, StreamRegistry
from dragoman.xds.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, SHORT_NAMES
from dragoman.xds.sotw import Ack, Nack, SotwStream, StaleRequest, StreamError

logger = logging.getLogger("dragoman.xds")

DELTA_UNIMPLEMENTED = (
    "incremental (delta) xDS is not implemented by dragoman yet; "
    "use state-of-the-world: ADS (StreamAggregatedResources) or the per-type Stream* RPCs"
)
FETCH_UNIMPLEMENTED = "REST-style Fetch* xDS is not implemented by dragoman; use a stream"


SERVER_OPTIONS: list[tuple[str, int]] = [
    # No SO_REUSEPORT: a second control plane on the same port must fail, not share it.
    ("grpc.so_reuseport", 0),
    # xDS streams are long and often quiet. gRPC's default answers a client's keepalive
    # pings (Envoy bootstraps commonly send one every 30 s) with a "too_many_pings" GOAWAY
    # once the server has sent no data for a few pings; accept up to one per second.
    ("grpc.http2.min_ping_interval_without_data_ms", 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Ping clients too, so the streams of a vanished proxy end and leave the registry.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
]


class XdsAddressError(OSError):
    """The xDS server could not listen on the address it was given."""


class SotwStreams:
    """Runs every SotW stream of a server against one cache, recording them in a registry."""

    def __init__(self, cache: SnapshotCache, registry: StreamRegistry) -> None:
        self.cache = cache
        self.registry = registry

    async def serve(
        self,
        requests: AsyncIterator[DiscoveryRequest],
        context: grpc.aio.ServicerContext,
        service: str,
        type_url: str | None,
    ) -> AsyncIterator[DiscoveryResponse]:
        protocol = SotwStream(type_url)
        stream = self.registry.open(service, context.peer(), protocol)
        reading: asyncio.Task[DiscoveryRequest] | None = None
        waiting: asyncio.Task[int] | None = None
        try:
            # Nothing is served before the first snapshot: an empty answer would delete config.
            await self.cache.wait_ready()
            generation = self.cache.generation
            reading = _read_next(requests)
            waiting = self._wait_for_change(generation)
            while True:
                await asyncio.wait((reading, waiting), return_when=asyncio.FIRST_COMPLETED)
                responses: list[DiscoveryResponse] = []
                # A request first: its ACK or NACK then refers to what the client has seen;
                # on_request itself pushes a newer snapshot after answering, in ADS order.
                if reading.done():
                    request = _request_or_none(reading)
                    if request is None:
                        return  # the client closed its side, or went away
                    reading = _read_next(requests)
                    if stream.identified:
                        self._regroup(stream)
                    else:
                        self._identify(stream, request)
                    try:
                        responses += protocol.on_request(
                            request, self.cache.snapshot_for(stream.group)
                        )
                    except StreamError as error:
                        logger.warning("xDS stream %s: %s", _describe(stream), error)
                        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
                if waiting.done():
                    generation = waiting.result()
                    waiting = self._wait_for_change(generation)
                    if stream.identified:
                        self._regroup(stream)
                        responses += protocol.on_snapshot(self.cache.snapshot_for(stream.group))
                _log_events(stream)
                for response in responses:
                    _log_push(stream, response)
                    yield response
        finally:
            for task in (reading, waiting):
                if task is not None:
                    task.cancel()
            for task in (reading, waiting):
                if task is not None:
                    with contextlib.suppress(BaseException):
                        await task
            self.registry.close(stream)
            if stream.identified:
                logger.info("xDS %s disconnected: %s", stream.service, _describe(stream))

    def _wait_for_change(self, generation: int) -> asyncio.Task[int]:
        return asyncio.create_task(
            self.cache.wait_for_change(generation), name="dragoman-xds-wait-change"
        )

    def _identify(self, stream: ConnectedStream, request: DiscoveryRequest) -> None:
        stream.identified = True
        stream.node_id = request.node.id
        stream.node_cluster = request.node.cluster
        stream.group = self.cache.group_for(stream.node_cluster)
        logger.info("xDS %s connected: %s peer=%s", stream.service, _describe(stream), stream.peer)

    def _regroup(self, stream: ConnectedStream) -> None:
        # A Gateway created after the node connected takes the node over from the all-group.
        group = self.cache.group_for(stream.node_cluster)
        if group != stream.group:
            stream.group = group
            logger.info("xDS %s regrouped: %s", stream.service, _describe(stream))


def _read_next(requests: AsyncIterator[DiscoveryRequest]) -> asyncio.Task[DiscoveryRequest]:
    async def next_request() -> DiscoveryRequest:
        return await anext(requests)

    return asyncio.create_task(next_request(), name="dragoman-xds-read")


def _request_or_none(reading: asyncio.Task[DiscoveryRequest]) -> DiscoveryRequest | None:
    """The request read, or None when the stream has no more (closed, reset, cancelled)."""
    if reading.cancelled():
        return None
    error = reading.exception()
    if error is None:
        return reading.result()
    if not isinstance(error, StopAsyncIteration):
        logger.debug("xDS stream read ended: %r", error)
    return None


def _describe(stream: ConnectedStream) -> str:
    group = stream.group or "(all gateways)"
    return f"node={stream.node_id!r} cluster={stream.node_cluster!r} group={group!r}"


def _short(type_url: str) -> str:
    return SHORT_NAMES.get(type_url, type_url)


def _log_events(stream: ConnectedStream) -> None:
    for event in stream.protocol.take_events():
        if isinstance(event, Nack):
            logger.warning(
                "NACK from node %r: %s version %s rejected (nonce %s, resources %s): %s",
                stream.node_id,
                _short(event.type_url),
                event.version,
                event.nonce,
                _some(event.resource_names),
                event.message,
            )
        elif isinstance(event, Ack):
            logger.debug(
                "ACK from node %r: %s version %s (nonce %s)",
                stream.node_id,
                _short(event.type_url),
                event.version,
                event.nonce,
            )
        elif isinstance(event, StaleRequest):
            logger.debug(
                "ignored stale %s request from node %r: nonce %r, expected %r%s",
                _short(event.type_url),
                stream.node_id,
                event.nonce,
                event.expected_nonce,
                f" (stale NACK: {event.error_message})" if event.error_message else "",
            )


def _some(names: tuple[str, ...], shown: int = 5) -> str:
    if not names:
        return "none"
    listed = ", ".join(names[:shown])
    return listed if len(names) <= shown else f"{listed} and {len(names) - shown} more"


def _log_push(stream: ConnectedStream, response: DiscoveryResponse) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "sending %s version %s nonce %s (%d resources) to node %r",
            _short(response.type_url),
            response.version_info,
            response.nonce,
            len(response.resources),
            stream.node_id,
        )


async def _refuse(context: grpc.aio.ServicerContext, message: str) -> None:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, message)


class AggregatedDiscoveryService(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):
    def __init__(self, streams: SotwStreams) -> None:
        self._streams = streams

    async def StreamAggregatedResources(
        self, request_iterator: AsyncIterator[DiscoveryRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[DiscoveryResponse]:
        async for response in self._streams.serve(request_iterator, context, "ADS", None):
            yield response

    async def DeltaAggregatedResources(
        self, request_iterator: AsyncIterator[object], context: grpc.aio.ServicerContext
    ) -> None:
        await _refuse(context, DELTA_UNIMPLEMENTED)


class _SingleTypeService:
    """The shared body of the per-type services: Stream* is SotW, Delta* and Fetch* refuse."""

    type_url: str

    def __init__(self, streams: SotwStreams) -> None:
        self._streams = streams

    async def _stream(
        self, requests: AsyncIterator[DiscoveryRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[DiscoveryResponse]:
        service = _short(self.type_url)
        async for response in self._streams.serve(requests, context, service, self.type_url):
            yield response

    async def _delta(
        self, requests: AsyncIterator[object], context: grpc.aio.ServicerContext
    ) -> None:
        await _refuse(context, DELTA_UNIMPLEMENTED)

    async def _fetch(self, request: DiscoveryRequest, context: grpc.aio.ServicerContext) -> None:
        await _refuse(context, FETCH_UNIMPLEMENTED)


class ClusterDiscoveryService(_SingleTypeService, cds_pb2_grpc.ClusterDiscoveryServiceServicer):
    type_url = CLUSTER
    StreamClusters = _SingleTypeService._stream
    DeltaClusters = _SingleTypeService._delta
    FetchClusters = _SingleTypeService._fetch


class EndpointDiscoveryService(_SingleTypeService, eds_pb2_grpc.EndpointDiscoveryServiceServicer):
    type_url = ENDPOINT
    StreamEndpoints = _SingleTypeService._stream
    DeltaEndpoints = _SingleTypeService._delta
    FetchEndpoints = _SingleTypeService._fetch


class ListenerDiscoveryService(_SingleTypeService, lds_pb2_grpc.ListenerDiscoveryServiceServicer):
    type_url = LISTENER
    StreamListeners = _SingleTypeService._stream
    DeltaListeners = _SingleTypeService._delta
    FetchListeners = _SingleTypeService._fetch


class RouteDiscoveryService(_SingleTypeService, rds_pb2_grpc.RouteDiscoveryServiceServicer):
    type_url = ROUTE
    StreamRoutes = _SingleTypeService._stream
    DeltaRoutes = _SingleTypeService._delta
    FetchRoutes = _SingleTypeService._fetch


# The port each started server listens on (useful when it was started on port 0).
_bound_ports: weakref.WeakKeyDictionary[grpc.aio.Server, int] = weakref.WeakKeyDictionary()


async def start_xds_server(
    cache: SnapshotCache, address: str, *, registry: StreamRegistry | None = None
) -> grpc.aio.Server:
    """Serve ADS and the per-type SotW services on `address` ("host:port"); return the server.

    `registry` receives the connected streams. Raises XdsAddressError if the address is
    in use or cannot be bound. Stop the server with `await server.stop(grace)`.
    """
    server = grpc.aio.server(options=SERVER_OPTIONS)
    streams = SotwStreams(cache, registry if registry is not None else StreamRegistry())
    ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(
        AggregatedDiscoveryService(streams), server
    )
    cds_pb2_grpc.add_ClusterDiscoveryServiceServicer_to_server(
        ClusterDiscoveryService(streams), server
    )
    eds_pb2_grpc.add_EndpointDiscoveryServiceServicer_to_server(
        EndpointDiscoveryService(streams), server
    )
    lds_pb2_grpc.add_ListenerDiscoveryServiceServicer_to_server(
        ListenerDiscoveryService(streams), server
    )
    rds_pb2_grpc.add_RouteDiscoveryServiceServicer_to_server(RouteDiscoveryService(streams), server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as error:
        raise XdsAddressError(
            f"cannot serve xDS on {address}: the address is in use or cannot be bound"
        ) from error
    if port == 0:
        raise XdsAddressError(f"cannot serve xDS on {address}: the address could not be bound")
    await server.start()
    _bound_ports[server] = port
    logger.info("xDS server listening on %s (port %d)", address, port)
    return server


def bound_port(server: grpc.aio.Server) -> int:
    """The port a server from `start_xds_server` listens on."""
    return _bound_ports[server]
