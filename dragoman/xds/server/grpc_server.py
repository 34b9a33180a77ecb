"""The gRPC shell around the stream state machines, on grpc.aio.

Serves ADS (StreamAggregatedResources, DeltaAggregatedResources), the per-type services for
clusters, endpoints, listeners and routes (Stream* and Delta*) and CSDS on one server.
Each xDS stream runs one loop that waits for the next request and for the next cache change
at the same time, feeds whichever comes to its SotwStream or DeltaStream, and writes the
responses in order. Responses are pre-encoded (`dragoman.xds.protocol.wire`): the handlers are
registered with a serializer that writes those bytes as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DiscoveryRequest,
)

from dragoman.log_text import plain, quoted, quoted_list
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SECRET,
    SHORT_NAMES,
    Snapshot,
)
from dragoman.xds.csds import csds_service
from dragoman.xds.protocol.client_kind import (
    GRPC_GROUP_SUFFIX,
    grpc_group,
    is_grpc_client,
    split_group,
)
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.events import Ack, Nack, StaleRequest, StreamError, StreamEvent
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.wire import DeltaResponse, Response, SotwResponse, serialize
from dragoman.xds.server import dependent_streams
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.snapshot_variants import ConfigSources
from dragoman.xds.server.stream_registry import ConnectedStream, StreamRegistry
from dragoman.xds.transport.access_rules import Refusal, xds_access
from dragoman.xds.transport.credentials import RotatingServerCredentials
from dragoman.xds.transport.peer_identity import peer_identity

logger = logging.getLogger("dragoman.xds")

FETCH_UNIMPLEMENTED = "REST-style Fetch* xDS is not implemented by dragoman; use a stream"

# Envoy's NACK messages name the resource and field at fault: worth more room than a name.
MAX_NACK_SHOWN = 1024

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
    # Each connection's read buffer grows to the largest request read (a SotW EDS request
    # names every CLA: 30 KiB for 1,000) and stays that size while the stream idles. Small
    # reads cost a few more syscalls for the rare large request and save tens of KiB per
    # connected client.
    ("grpc.experimental.tcp_max_read_buffer_size", 8192),
]

# The per-type services: gRPC service name, type served, and the names of its three methods.
PER_TYPE_SERVICES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "envoy.service.cluster.v3.ClusterDiscoveryService",
        CLUSTER,
        "StreamClusters",
        "DeltaClusters",
        "FetchClusters",
    ),
    (
        "envoy.service.endpoint.v3.EndpointDiscoveryService",
        ENDPOINT,
        "StreamEndpoints",
        "DeltaEndpoints",
        "FetchEndpoints",
    ),
    (
        "envoy.service.listener.v3.ListenerDiscoveryService",
        LISTENER,
        "StreamListeners",
        "DeltaListeners",
        "FetchListeners",
    ),
    (
        "envoy.service.route.v3.RouteDiscoveryService",
        ROUTE,
        "StreamRoutes",
        "DeltaRoutes",
        "FetchRoutes",
    ),
    (
        "envoy.service.secret.v3.SecretDiscoveryService",
        SECRET,
        "StreamSecrets",
        "DeltaSecrets",
        "FetchSecrets",
    ),
)
ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"

Request = DiscoveryRequest | DeltaDiscoveryRequest


class XdsAddressError(OSError):
    """The xDS server could not listen on the address it was given."""


class XdsInsecureError(XdsAddressError):
    """Plaintext xDS asked for on an address other than loopback, without saying it is meant."""


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
        self.dependent_streams = dependent_streams.DependentStreamWatch(
            registry, lambda: cache.per_type_cluster_name or "?", dependent_stream_timeout_s
        )

    async def serve(
        self,
        context: grpc.aio.ServicerContext,
        service: str,
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
        try:
            # Nothing is served before the first snapshot: an empty answer would delete config.
            await self.cache.wait_ready()
            generation = self.cache.generation
            reading = _read_next(context)
            waiting = self._wait_for_change(generation)
            while True:
                await asyncio.wait((reading, waiting), return_when=asyncio.FIRST_COMPLETED)
                responses: list[Response] = []
                # A request first: its ACK or NACK then refers to what the client has seen;
                # on_request itself pushes a newer snapshot after answering, in ADS order.
                if reading.done():
                    request = _request_or_none(reading)
                    if request is None:
                        return  # the client closed its side, or went away
                    self.registry.requests += 1
                    reading = _read_next(context)
                    if stream.identified:
                        self._regroup(stream)
                    else:
                        refusal = self._identify(stream, request)
                        if refusal is not None:
                            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal.message)
                    snapshot = await self._snapshot(stream, sources)
                    try:
                        responses += _feed(protocol, request, snapshot)
                    except StreamError as error:
                        logger.warning("xDS stream %s: %s", _describe(stream), quoted(str(error)))
                        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
                    # Not kept while the stream idles: a SotW EDS request names every CLA.
                    request = None
                if waiting.done():
                    generation = waiting.result()
                    waiting = self._wait_for_change(generation)
                    if stream.identified:
                        self._regroup(stream)
                        snapshot = await self._snapshot(stream, sources)
                        responses += protocol.on_snapshot(snapshot)
                self._report_events(stream)
                for response in responses:
                    _log_push(stream, response)
                    _call(self.callbacks.on_response, stream, response)
                    yield response
                responses.clear()  # nothing of it is kept while the stream idles
        finally:
            for task in (reading, waiting):
                if task is not None:
                    task.cancel()
            for task in (reading, waiting):
                if task is not None:
                    with contextlib.suppress(BaseException):
                        await task
            self.registry.close(stream)
            self.dependent_streams.forget(stream)
            _call(self.callbacks.on_close, stream)
            if stream.identified:
                logger.info(
                    "xDS %s disconnected: %s",
                    _kind(stream),
                    _describe(stream),
                    extra={"node": stream.node_id},
                )

    def handler(
        self, service: str, type_url: str | None, *, delta: bool
    ) -> Callable[[AsyncIterator[Request], grpc.aio.ServicerContext], AsyncIterator[Response]]:
        async def handle(
            requests: AsyncIterator[Request], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Response]:
            # Requests are read with context.read() (see _read_next), never from `requests`.
            async for response in self.serve(context, service, type_url, delta=delta):
                yield response

        return handle

    async def _snapshot(self, stream: ConnectedStream, sources: ConfigSources) -> Snapshot:
        """The stream's snapshot, made off the event loop if it has to be made (gRPC)."""
        await self.cache.prepare(stream.group)
        return self.cache.snapshot_for(stream.group, sources)

    def _wait_for_change(self, generation: int) -> asyncio.Task[int]:
        return asyncio.create_task(
            self.cache.wait_for_change(generation), name="dragoman-xds-wait-change"
        )

    def _identify(self, stream: ConnectedStream, request: Request) -> Refusal | None:
        """Take the node from the first request; a Refusal if its certificate forbids it."""
        grpc_client = is_grpc_client(request.node)
        access = xds_access(
            stream.identity, stream.authenticated, request.node.cluster, grpc_client
        )
        if isinstance(access, Refusal):
            logger.warning(
                "xDS %s refused: node=%s cluster=%s identity=%s peer=%s: %s",
                _kind(stream),
                quoted(request.node.id),
                quoted(request.node.cluster),
                plain(str(stream.identity)) if stream.identity else "(none)",
                stream.peer,
                quoted(access.message, MAX_NACK_SHOWN),
            )
            return access
        stream.identified = True
        stream.node_id = request.node.id
        stream.node_cluster = request.node.cluster
        stream.pinned_group = access.group
        stream.group = self._group_for(stream, grpc_client)
        logger.info(
            "xDS %s connected: %s peer=%s%s",
            _kind(stream),
            _describe(stream),
            stream.peer,
            f" identity={plain(str(stream.identity))}" if stream.identity is not None else "",
            extra={"node": stream.node_id},
        )
        self._check_gateway(stream)
        return None

    def _group_for(self, stream: ConnectedStream, grpc_client: bool) -> str:
        if stream.pinned_group is not None:
            # Its own Gateway only: an empty group until that Gateway exists, never all.
            return grpc_group(stream.pinned_group) if grpc_client else stream.pinned_group
        return self.cache.group_for(stream.node_cluster, grpc=grpc_client)

    def _regroup(self, stream: ConnectedStream) -> None:
        # A Gateway created after the node connected takes the node over from the all-group.
        group = self._group_for(stream, is_grpc_client(stream.node))
        if group != stream.group:
            stream.group = group
            logger.info("xDS %s regrouped: %s", _kind(stream), _describe(stream))
        self._check_gateway(stream)

    def _check_gateway(self, stream: ConnectedStream) -> None:
        """Warn once when a node's Gateway goes missing (or never existed), and say when it
        appears: such a node is served no listeners meanwhile, never every Gateway's."""
        if not self.cache.ready:
            return
        # The Gateway a client certificate pins the node to, else the one node.cluster names.
        gateway = stream.pinned_group if stream.pinned_group is not None else stream.node_cluster
        missing = self.cache.missing_gateway(gateway)
        if missing == stream.gateway_missing:
            return
        stream.gateway_missing = missing
        if missing:
            logger.warning(
                "xDS %s: the node's Gateway %r does not exist; it gets no listeners until it "
                "does (%s)",
                _kind(stream),
                gateway,
                _describe(stream),
            )
        else:
            logger.info(
                "xDS %s: Gateway %r exists now (%s)", _kind(stream), gateway, _describe(stream)
            )

    def _report_events(self, stream: ConnectedStream) -> None:
        for event in stream.protocol.take_events():
            _log_event(stream, event)
            if isinstance(event, Ack):
                snapshot = self.cache.snapshot_for(stream.group)
                self.dependent_streams.on_ack(stream, event.type_url, snapshot)
            elif isinstance(event, Nack):
                self.dependent_streams.on_nack(stream, event.message)
            _call(self.callbacks.on_event, stream, event)


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


def _request_or_none(reading: asyncio.Task[Request | None]) -> Request | None:
    """The request read, or None when the stream has no more (closed, reset, cancelled)."""
    if reading.cancelled():
        return None
    error = reading.exception()
    if error is None:
        return reading.result()
    logger.debug("xDS stream read ended: %r", error)
    return None


def _kind(stream: ConnectedStream) -> str:
    return f"{stream.service} (delta)" if stream.delta else stream.service


def _describe(stream: ConnectedStream) -> str:
    base, grpc = split_group(stream.group)
    group = (base or "(all gateways)") + (GRPC_GROUP_SUFFIX if grpc else "")
    return (
        f"node={quoted(stream.node_id)} cluster={quoted(stream.node_cluster)} group={quoted(group)}"
    )


def _short(type_url: str) -> str:
    return SHORT_NAMES.get(type_url) or quoted(type_url)


def _log_event(stream: ConnectedStream, event: StreamEvent) -> None:
    if isinstance(event, Nack):
        logger.warning(
            "NACK from node %s: %s version %s rejected (nonce %s, resources %s): %s",
            quoted(stream.node_id),
            _short(event.type_url),
            quoted(event.version),
            quoted(event.nonce),
            quoted_list(event.resource_names),
            quoted(event.message, MAX_NACK_SHOWN),
            extra={"node": stream.node_id},
        )
    elif isinstance(event, Ack):
        logger.debug(
            "ACK from node %s: %s version %s (nonce %s)",
            quoted(stream.node_id),
            _short(event.type_url),
            quoted(event.version),
            quoted(event.nonce),
        )
    elif isinstance(event, StaleRequest):
        logger.debug(
            "ignored stale %s request from node %s: nonce %s, expected %s%s",
            _short(event.type_url),
            quoted(stream.node_id),
            quoted(event.nonce),
            quoted(event.expected_nonce),
            f" (stale NACK: {quoted(event.error_message, MAX_NACK_SHOWN)})"
            if event.error_message
            else "",
        )


def _log_push(stream: ConnectedStream, response: Response) -> None:
    if not logger.isEnabledFor(logging.DEBUG):
        return
    if isinstance(response, SotwResponse):
        logger.debug(
            "sending %s version %s nonce %s (%d resources) to node %s",
            _short(response.type_url),
            response.version_info,
            response.nonce,
            len(response.names),
            quoted(stream.node_id),
        )
    elif isinstance(response, DeltaResponse):
        logger.debug(
            "sending delta %s system version %s nonce %s (%d resources, %d removed) to node %s",
            _short(response.type_url),
            response.system_version_info,
            response.nonce,
            len(response.names),
            len(response.removed),
            quoted(stream.node_id),
        )


async def _fetch_unimplemented(
    request: DiscoveryRequest, context: grpc.aio.ServicerContext
) -> None:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, FETCH_UNIMPLEMENTED)


def _stream_handler(
    streams: XdsStreams, service: str, type_url: str | None, *, delta: bool
) -> grpc.RpcMethodHandler:
    request_type = DeltaDiscoveryRequest if delta else DiscoveryRequest
    return grpc.stream_stream_rpc_method_handler(
        streams.handler(service, type_url, delta=delta),
        request_deserializer=request_type.FromString,
        response_serializer=serialize,
    )


def xds_handlers(streams: XdsStreams) -> list[grpc.GenericRpcHandler]:
    """ADS and the per-type services, SotW and delta, each writing pre-encoded responses."""
    handlers = [
        grpc.method_handlers_generic_handler(
            ADS_SERVICE,
            {
                "StreamAggregatedResources": _stream_handler(streams, "ADS", None, delta=False),
                "DeltaAggregatedResources": _stream_handler(streams, "ADS", None, delta=True),
            },
        )
    ]
    for service_name, type_url, stream, delta, fetch in PER_TYPE_SERVICES:
        short = _short(type_url)
        handlers.append(
            grpc.method_handlers_generic_handler(
                service_name,
                {
                    stream: _stream_handler(streams, short, type_url, delta=False),
                    delta: _stream_handler(streams, short, type_url, delta=True),
                    fetch: grpc.unary_unary_rpc_method_handler(
                        _fetch_unimplemented,
                        request_deserializer=DiscoveryRequest.FromString,
                        response_serializer=serialize,
                    ),
                },
            )
        )
    return handlers


# The port each started server listens on (useful when it was started on port 0).
_bound_ports: weakref.WeakKeyDictionary[grpc.aio.Server, int] = weakref.WeakKeyDictionary()


async def start_xds_server(
    cache: SnapshotCache,
    address: str,
    *,
    registry: StreamRegistry | None = None,
    callbacks: XdsCallbacks | None = None,
    dependent_stream_timeout_s: float = dependent_streams.DEFAULT_TIMEOUT_S,
    tls: RotatingServerCredentials | None = None,
    insecure: bool = False,
) -> grpc.aio.Server:
    """Serve xDS (ADS and per-type, SotW and delta) and CSDS on `address` ("host:port").

    With `tls`, only over mutual TLS, each client receiving what its certificate's identity
    allows (`dragoman.xds.transport.access_rules`). Without it, plaintext on a loopback
    address only, unless `insecure` (then loudly logged).

    `registry` receives the connected streams (CSDS reports them). Raises XdsAddressError if
    the address is in use or cannot be bound, XdsInsecureError for plaintext elsewhere than
    on loopback without `insecure`. Stop the server with `await server.stop(grace)`.
    A per-type client that ACKs clusters (listeners) but opens no EDS (RDS) stream within
    `dependent_stream_timeout_s` is logged: its bootstrap names dragoman's cluster otherwise.
    """
    if tls is None and not is_loopback(address):
        if not insecure:
            raise XdsInsecureError(
                f"refusing to serve xDS in plaintext on {address}: anyone who can connect "
                "would receive every private key served. Give --xds-tls-cert, --xds-tls-key "
                "and --xds-tls-client-ca, or --xds-insecure if this is really meant"
            )
        logger.warning(
            "INSECURE: serving xDS in plaintext on %s: any client that can connect receives "
            "every listener's private key and every Gateway's configuration",
            address,
        )
    server = grpc.aio.server(options=SERVER_OPTIONS)
    registry = registry if registry is not None else StreamRegistry()
    streams = XdsStreams(cache, registry, callbacks, dependent_stream_timeout_s)
    server.add_generic_rpc_handlers(xds_handlers(streams))
    csds_service.add_to_server(server, registry)
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, tls.credentials)
    except RuntimeError as error:
        raise XdsAddressError(
            f"cannot serve xDS on {address}: the address is in use or cannot be bound"
        ) from error
    if port == 0:
        raise XdsAddressError(f"cannot serve xDS on {address}: the address could not be bound")
    await server.start()
    _bound_ports[server] = port
    logger.info(
        "xDS server listening on %s (port %d, %s)",
        address,
        port,
        "mutual TLS" if tls is not None else "plaintext",
    )
    return server


def is_loopback(address: str) -> bool:
    """Whether `address` ("host:port") binds a loopback address only."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bound_port(server: grpc.aio.Server) -> int:
    """The port a server from `start_xds_server` listens on."""
    return _bound_ports[server]
