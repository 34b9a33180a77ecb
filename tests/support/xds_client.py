"""A small xDS client for protocol tests: SotW or delta, ADS or one type, over real gRPC.

It keeps what a real client keeps (subscribed names, last nonce and accepted version per
type, the resources it holds) and lets a test decide when to ACK or NACK, the way
go-control-plane's test client and ii/xds-test-harness drive a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

import grpc
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.cluster.v3 import cds_pb2_grpc
from envoy.service.discovery.v3 import ads_pb2_grpc
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryRequest,
    DiscoveryResponse,
)
from envoy.service.endpoint.v3 import eds_pb2_grpc
from envoy.service.listener.v3 import lds_pb2_grpc
from envoy.service.route.v3 import rds_pb2_grpc
from envoy.service.secret.v3 import sds_pb2_grpc
from google.rpc.status_pb2 import Status

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_loop import XdsCallbacks
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import packed_name

TIMEOUT = 5.0
QUIET = 0.3  # how long "nothing arrives" is watched for

_STUBS = {
    CLUSTER: (cds_pb2_grpc.ClusterDiscoveryServiceStub, "StreamClusters", "DeltaClusters"),
    ENDPOINT: (eds_pb2_grpc.EndpointDiscoveryServiceStub, "StreamEndpoints", "DeltaEndpoints"),
    LISTENER: (lds_pb2_grpc.ListenerDiscoveryServiceStub, "StreamListeners", "DeltaListeners"),
    ROUTE: (rds_pb2_grpc.RouteDiscoveryServiceStub, "StreamRoutes", "DeltaRoutes"),
    SECRET: (sds_pb2_grpc.SecretDiscoveryServiceStub, "StreamSecrets", "DeltaSecrets"),
}


@dataclass(frozen=True)
class Received:
    """One response, decoded: resources by name, each with its content digest (for delta, the
    version the server gave it, which dragoman makes the same digest)."""

    type_url: str
    version: str  # version_info, or system_version_info for delta
    nonce: str
    resources: dict[str, str]
    removed: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return list(self.resources)


@dataclass
class _TypeState:
    names: set[str] = field(default_factory=set)
    nonce: str = ""
    version: str = ""  # last accepted
    held: dict[str, str] = field(default_factory=dict)  # name -> version (delta)


class XdsClient:
    """One stream. `type_url` None: ADS; `delta`: the incremental protocol."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        node: Node,
        *,
        type_url: str | None = None,
        delta: bool = False,
        initial_versions: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.node = node
        self.delta = delta
        self.type_url = type_url
        self._types: dict[str, _TypeState] = {}
        self._initial = initial_versions or {}
        self._sent_node = False
        self._seen: set[str] = set()  # types requested so far
        self._reader: asyncio.Future[object] | None = None  # a read not yet consumed
        if type_url is None:
            stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
            method = "DeltaAggregatedResources" if delta else "StreamAggregatedResources"
        else:
            stub_class, sotw, incremental = _STUBS[type_url]
            stub = stub_class(channel)
            method = incremental if delta else sotw
        self.call: grpc.aio.StreamStreamCall = getattr(stub, method)()

    def state(self, type_url: str) -> _TypeState:
        return self._types.setdefault(type_url, _TypeState())

    # Requests.

    async def subscribe(self, type_url: str, names: Iterable[str] = ()) -> None:
        """Add names (none at first: a legacy wildcard request for LDS/CDS)."""
        added = list(names)
        state = self.state(type_url)
        state.names.update(added)
        if self.delta:
            first = type_url not in self._seen
            initial = self._initial.get(type_url, {}) if first else {}
            await self._send_delta(type_url, subscribe=added, initial=initial)
        else:
            await self._send_sotw(type_url, sorted(state.names), nonce=state.nonce)

    async def unsubscribe(self, type_url: str, names: Iterable[str]) -> None:
        removed = list(names)
        state = self.state(type_url)
        state.names.difference_update(removed)
        if self.delta:
            await self._send_delta(type_url, unsubscribe=removed)
        else:
            await self._send_sotw(type_url, sorted(state.names), nonce=state.nonce)

    async def ack(self, received: Received) -> None:
        state = self.state(received.type_url)
        state.version = received.version
        if self.delta:
            await self._send_delta(received.type_url, nonce=received.nonce)
        else:
            await self._send_sotw(received.type_url, sorted(state.names), nonce=received.nonce)

    async def nack(self, received: Received, error: str) -> None:
        state = self.state(received.type_url)
        if self.delta:
            await self._send_delta(received.type_url, nonce=received.nonce, error=error)
        else:
            await self._send_sotw(
                received.type_url, sorted(state.names), nonce=received.nonce, error=error
            )

    async def send_raw(self, request: DiscoveryRequest | DeltaDiscoveryRequest) -> None:
        await self.call.write(request)

    # Responses.

    async def receive(self, timeout: float = TIMEOUT) -> Received:
        message = await asyncio.wait_for(asyncio.shield(self._pending_read()), timeout)
        self._reader = None
        assert message is not grpc.aio.EOF, "the server ended the stream"
        if isinstance(message, DeltaDiscoveryResponse):
            received = Received(
                type_url=message.type_url,
                version=message.system_version_info,
                nonce=message.nonce,
                resources={r.name: r.version for r in message.resources},
                removed=tuple(message.removed_resources),
            )
            state = self.state(received.type_url)
            state.held.update(received.resources)
            for name in received.removed:
                state.held.pop(name, None)
        else:
            assert isinstance(message, DiscoveryResponse)
            received = Received(
                type_url=message.type_url,
                version=message.version_info,
                nonce=message.nonce,
                resources={
                    packed_name(r): hashlib.sha256(r.value).hexdigest() for r in message.resources
                },
            )
        self.state(received.type_url).nonce = received.nonce
        return received

    async def receive_acked(self, timeout: float = TIMEOUT) -> Received:
        received = await self.receive(timeout)
        await self.ack(received)
        return received

    async def nothing(self, within: float = QUIET) -> None:
        """Assert that no response arrives for `within` seconds."""
        try:
            message = await asyncio.wait_for(asyncio.shield(self._pending_read()), within)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected response: {message}")

    def _pending_read(self) -> asyncio.Future[object]:
        if self._reader is None:
            self._reader = asyncio.ensure_future(self.call.read())
        return self._reader

    def cancel(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        self.call.cancel()

    # Internals.

    def _node_once(self) -> Node | None:
        if self._sent_node:
            return None
        self._sent_node = True
        return self.node

    async def _send_sotw(
        self, type_url: str, names: list[str], *, nonce: str, error: str | None = None
    ) -> None:
        request = DiscoveryRequest(
            type_url=type_url,
            resource_names=names,
            version_info=self.state(type_url).version,
            response_nonce=nonce,
        )
        await self._finish(request, error)

    async def _send_delta(
        self,
        type_url: str,
        *,
        subscribe: Iterable[str] = (),
        unsubscribe: Iterable[str] = (),
        nonce: str = "",
        initial: dict[str, str] | None = None,
        error: str | None = None,
    ) -> None:
        request = DeltaDiscoveryRequest(
            type_url=type_url,
            resource_names_subscribe=list(subscribe),
            resource_names_unsubscribe=list(unsubscribe),
            response_nonce=nonce,
            initial_resource_versions=initial or {},
        )
        await self._finish(request, error)

    async def _finish(
        self, request: DiscoveryRequest | DeltaDiscoveryRequest, error: str | None
    ) -> None:
        self._seen.add(request.type_url)
        node = self._node_once()
        if node is not None:
            request.node.CopyFrom(node)
        if error is not None:
            request.error_detail.CopyFrom(Status(code=3, message=error))
        await self.call.write(request)


@contextlib.asynccontextmanager
async def xds_endpoint(
    cache: SnapshotCache,
    *,
    registry: StreamRegistry | None = None,
    callbacks: XdsCallbacks | None = None,
) -> AsyncIterator[tuple[str, grpc.aio.Channel]]:
    """A real dragoman xDS server on a loopback port: its address and a channel to it."""
    server = await start_xds_server(cache, "127.0.0.1:0", registry=registry, callbacks=callbacks)
    address = f"127.0.0.1:{bound_port(server)}"
    channel = grpc.aio.insecure_channel(address)
    try:
        yield address, channel
    finally:
        await channel.close()
        await server.stop(None)


@contextlib.asynccontextmanager
async def xds_channel(
    cache: SnapshotCache,
    *,
    registry: StreamRegistry | None = None,
    callbacks: XdsCallbacks | None = None,
) -> AsyncIterator[grpc.aio.Channel]:
    """A real dragoman xDS server on a loopback port and a channel to it."""
    async with xds_endpoint(cache, registry=registry, callbacks=callbacks) as (_, channel):
        yield channel
