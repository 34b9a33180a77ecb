"""What one client may make a stream do: a flood of requests is answered once per burst, and
the state it ends in is the one its requests add up to."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import grpc
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3 import ads_pb2_grpc
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryResponse, DiscoveryResponse

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.snapshots.resources import CLUSTER, ENDPOINT
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_loop import XdsCallbacks
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import (
    delta_request,
    eds_cluster,
    endpoints,
    request,
    snapshot,
)

NODE = Node(id="flooder", cluster="edge-proxies")
FLOOD = 1000


def two_services() -> SnapshotCache:
    cache = SnapshotCache()
    cache.set_snapshots(
        {
            ALL_GATEWAYS: snapshot(
                clusters=[eds_cluster("a"), eds_cluster("b")],
                assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
            )
        }
    )
    return cache


@contextlib.asynccontextmanager
async def serving(
    cache: SnapshotCache, callbacks: XdsCallbacks | None = None, limits: XdsLimits | None = None
) -> AsyncIterator[tuple[StreamRegistry, grpc.aio.Channel]]:
    registry = StreamRegistry()
    server = await start_xds_server(
        cache, "127.0.0.1:0", registry=registry, callbacks=callbacks, limits=limits
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{bound_port(server)}")
    try:
        yield registry, channel
    finally:
        await channel.close()
        await server.stop(None)


async def drain(call: grpc.aio.StreamStreamCall, into: list[object]) -> None:
    while True:
        message = await call.read()
        if message is grpc.aio.EOF:
            return
        into.append(message)


async def until_quiet(received: list[object], quiet_s: float = 0.5, limit_s: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    count = -1
    while count != len(received) and loop.time() < deadline:
        count = len(received)
        await asyncio.sleep(quiet_s)


async def eventually(condition: Callable[[], bool], limit_s: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "never came true"
        await asyncio.sleep(0.05)


def test_a_delta_flood_is_answered_once_per_burst_and_ends_in_the_state_it_asked_for() -> None:
    merged: list[int] = []

    async def scenario() -> None:
        callbacks = XdsCallbacks(on_merged=lambda _stream, count: merged.append(count))
        async with serving(two_services(), callbacks) as (registry, channel):
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).DeltaAggregatedResources()
            received: list[DeltaDiscoveryResponse] = []
            reading = asyncio.create_task(drain(call, received))  # type: ignore[arg-type]
            await call.write(delta_request(ENDPOINT, ["a"], node=NODE))
            # Subscribing to a name again asks for it again: each of these would be answered.
            for i in range(FLOOD):
                if i % 2:
                    await call.write(delta_request(ENDPOINT, unsubscribe=["b"]))
                else:
                    await call.write(delta_request(ENDPOINT, ["b"]))
            await call.write(delta_request(ENDPOINT, ["b"]))
            await until_quiet(received)  # type: ignore[arg-type]
            (stream,) = registry.streams()
            await eventually(lambda: stream.protocol.types[ENDPOINT].names == {"a", "b"})
            await until_quiet(received)  # type: ignore[arg-type]
            held: dict[str, str] = {}
            for response in received:
                for removed in response.removed_resources:
                    held.pop(removed, None)
                for resource in response.resources:
                    held[resource.name] = resource.version
            assert set(held) == {"a", "b"}
            call.cancel()
            reading.cancel()
            # Without merging, every other request of the flood is answered.
            assert len(received) < 150, f"{len(received)} responses to {FLOOD} requests"

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert sum(merged) > FLOOD // 2


def test_a_sotw_flood_is_answered_from_its_latest_request() -> None:
    async def scenario() -> None:
        async with serving(two_services()) as (registry, channel):
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
            received: list[DiscoveryResponse] = []
            reading = asyncio.create_task(drain(call, received))  # type: ignore[arg-type]
            await call.write(request(ENDPOINT, ["a"], node=NODE))
            await until_quiet(received, 0.2)  # type: ignore[arg-type]
            nonce = received[-1].nonce
            for i in range(FLOOD):
                await call.write(request(ENDPOINT, ["a", "b"][: 1 + i % 2], nonce=nonce))
            await until_quiet(received)  # type: ignore[arg-type]
            # The flood's requests name a superseded nonce once answered; the client's next
            # request, on the latest one, decides.
            await call.write(request(ENDPOINT, ["b"], nonce=received[-1].nonce))
            await until_quiet(received, 0.2)  # type: ignore[arg-type]
            (stream,) = registry.streams()
            await eventually(lambda: stream.protocol.types[ENDPOINT].names == {"b"})
            assert len(received) < 150
            call.cancel()
            reading.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_delta_reconnect_naming_50000_resources_is_accepted() -> None:
    """Over gRPC's default 4 MiB: Envoy reconnecting with what it holds of 50,000 clusters."""
    names = [f"namespace-{i % 100:03d}/service-name-{i:06d}/8080" for i in range(50_000)]
    version = "0123456789abcdef" * 4  # a sha256 in hex, as dragoman's resource versions
    reconnect = delta_request(
        CLUSTER, ["*", *names], initial={n: version for n in names}, node=NODE
    )
    assert reconnect.ByteSize() > 4 * 1024 * 1024

    async def scenario() -> None:
        async with serving(two_services()) as (_registry, channel):
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).DeltaAggregatedResources()
            await call.write(reconnect)
            response = await asyncio.wait_for(call.read(), 20)
            assert isinstance(response, DeltaDiscoveryResponse)
            # It held 50,000 clusters the server does not have: they are removed.
            assert len(response.removed_resources) + len(response.resources) >= 50_000
            call.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 60))
