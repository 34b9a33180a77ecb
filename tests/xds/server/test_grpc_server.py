"""The gRPC shell: a real grpc.aio server on loopback, driven by real grpc client stubs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import grpc
import pytest
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.cluster.v3 import cds_pb2_grpc
from envoy.service.discovery.v3 import ads_pb2_grpc
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryResponse,
)

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, Snapshot
from dragoman.xds.server.grpc_server import XdsAddressError, bound_port, start_xds_server
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import (
    ack,
    eds_cluster,
    endpoints,
    listener,
    nack,
    names_in,
    request,
    routes,
    snapshot,
)

TIMEOUT = 5.0
# A node.cluster naming no Gateway: the node gets every Gateway's configuration.
NODE = Node(id="envoy-7", cluster="edge-proxies")
# One naming a Gateway (`ns/name`): that Gateway's alone, and nothing while it does not exist.
GATEWAY_NODE = Node(id="envoy-8", cluster="default/gateway")


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


def first_snapshot() -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )


def with_clusters(*names: str, timeout_s: int = 1) -> Snapshot:
    return snapshot(clusters=[eds_cluster(n, timeout_s=timeout_s) for n in names])


@contextlib.asynccontextmanager
async def serving(
    cache: SnapshotCache,
) -> AsyncIterator[tuple[grpc.aio.Server, StreamRegistry, grpc.aio.Channel]]:
    registry = StreamRegistry()
    server = await start_xds_server(cache, "127.0.0.1:0", registry=registry)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{bound_port(server)}")
    try:
        yield server, registry, channel
    finally:
        await channel.close()
        await server.stop(None)


async def read(call: grpc.aio.StreamStreamCall) -> DiscoveryResponse:
    response = await asyncio.wait_for(call.read(), TIMEOUT)
    assert isinstance(response, DiscoveryResponse)
    return response


async def until(condition: Callable[[], bool]) -> None:
    """Wait, bounded, for something the server does on its own time."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def ads(channel: grpc.aio.Channel) -> grpc.aio.StreamStreamCall:
    return ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()


def test_ads_initial_request_gets_nonce_version_and_resources() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        snap = first_snapshot()
        cache.set_snapshots({ALL_GATEWAYS: snap})
        async with serving(cache) as (_, registry, channel):
            call = ads(channel)
            await call.write(request(CLUSTER, node=NODE))
            response = await read(call)
            assert response.type_url == CLUSTER
            assert response.nonce
            assert response.version_info == snap.of_type(CLUSTER).version
            assert names_in(response) == ["a", "b"]
            (stream,) = registry.streams()
            assert (stream.service, stream.node_id, stream.node_cluster) == (
                "ADS",
                "envoy-7",
                "edge-proxies",
            )
            assert stream.group == ALL_GATEWAYS
            call.cancel()

    run(scenario)


def test_ads_ack_gets_no_response_and_is_recorded() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
        async with serving(cache) as (_, registry, channel):
            call = ads(channel)
            await call.write(request(CLUSTER, node=NODE))
            cds = await read(call)
            await call.write(ack(cds))
            (stream,) = registry.streams()
            await until(lambda: stream.type_statuses()[0].acked_version == cds.version_info)
            # The next thing the client reads is the next push, not an answer to its ACK.
            cache.set_snapshots({ALL_GATEWAYS: with_clusters("a", "b")})
            pushed = await read(call)
            assert names_in(pushed) == ["a", "b"]
            call.cancel()

    run(scenario)


def test_set_snapshots_pushes_update_without_client_request() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: first_snapshot()})
        async with serving(cache) as (_, _, channel):
            call = ads(channel)
            await call.write(request(ENDPOINT, ["a"], node=NODE))
            eds = await read(call)
            assert names_in(eds) == ["a"]
            moved = snapshot(assignments=[endpoints("a", "10.0.0.9")])
            cache.set_snapshots({ALL_GATEWAYS: moved})
            pushed = await read(call)
            assert pushed.type_url == ENDPOINT
            assert pushed.nonce != eds.nonce
            assert pushed.version_info == moved.of_type(ENDPOINT).version
            call.cancel()

    run(scenario)


def test_nack_is_logged_and_rejected_content_not_resent(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
        async with serving(cache) as (_, registry, channel):
            call = ads(channel)
            await call.write(request(CLUSTER, node=NODE))
            cds = await read(call)
            await call.write(nack(cds, "cluster a: bad connect_timeout"))
            (stream,) = registry.streams()
            await until(lambda: stream.type_statuses()[0].last_nack is not None)
            # The same content again: nothing is sent. New content: sent.
            cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
            fixed = with_clusters("a", timeout_s=2)
            cache.set_snapshots({ALL_GATEWAYS: fixed})
            response = await read(call)
            assert response.version_info == fixed.of_type(CLUSTER).version
            call.cancel()
        nacks = [r for r in caplog.records if r.levelno == logging.WARNING and "NACK" in r.message]
        assert len(nacks) == 1
        message = nacks[0].getMessage()
        assert "envoy-7" in message and "CDS" in message and cds.version_info in message
        assert "cluster a: bad connect_timeout" in message

    with caplog.at_level(logging.INFO, logger="dragoman.xds"):
        run(scenario)


def test_client_strings_are_logged_bounded_and_escaped(caplog: pytest.LogCaptureFixture) -> None:
    """A 1 MB node id and a NACK message with line breaks: every record stays one short line."""
    hostile = Node(id="n" * 1_000_000 + "\nFORGED", cluster="c\r\nFORGED")

    async def scenario() -> None:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
        async with serving(cache) as (_, registry, channel):
            call = ads(channel)
            await call.write(request(CLUSTER, node=hostile))
            cds = await read(call)
            await call.write(nack(cds, "bad\nWARNING dragoman.xds: FORGED" + "x" * 100_000))
            (stream,) = registry.streams()
            await until(lambda: stream.type_statuses()[0].last_nack is not None)
            call.cancel()

    with caplog.at_level(logging.DEBUG, logger="dragoman.xds"):
        run(scenario)
    messages = [r.getMessage() for r in caplog.records if r.name == "dragoman.xds"]
    assert any("NACK" in m for m in messages) and any("connected" in m for m in messages)
    for message in messages:
        assert "\n" not in message and "\r" not in message, message[:300]
        assert len(message) < 4000, message[:300]


def test_ads_empty_type_url_is_invalid_argument() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: first_snapshot()})
        async with serving(cache) as (_, registry, channel):
            call = ads(channel)
            await call.write(request("", node=NODE))
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await read(call)
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "type_url" in (raised.value.details() or "")
            await until(lambda: len(registry) == 0)

    run(scenario)


def test_client_disconnect_cleans_up_registry(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: first_snapshot()})
        async with serving(cache) as (_, registry, channel):
            call = ads(channel)
            await call.write(request(CLUSTER, node=NODE))
            await read(call)
            assert len(registry) == 1
            call.cancel()
            await until(lambda: len(registry) == 0)
            # A client that half-closes ends its stream too.
            closing = ads(channel)
            await closing.write(request(LISTENER, node=NODE))
            await read(closing)
            await closing.done_writing()
            assert await asyncio.wait_for(closing.code(), TIMEOUT) == grpc.StatusCode.OK
            await until(lambda: len(registry) == 0)
            assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("dragoman-xds")]
        messages = [r.getMessage() for r in caplog.records]
        assert any("connected" in m and "envoy-7" in m and "edge-proxies" in m for m in messages)
        assert sum("disconnected" in m for m in messages) == 2
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

    with caplog.at_level(logging.INFO):
        run(scenario)


def test_server_stop_ends_open_streams_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: first_snapshot()})
        registry = StreamRegistry()
        server = await start_xds_server(cache, "127.0.0.1:0", registry=registry)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{bound_port(server)}") as channel:
            call = ads(channel)
            await call.write(request(CLUSTER, node=NODE))
            await read(call)
            await server.stop(None)
            with pytest.raises(grpc.aio.AioRpcError):
                await read(call)
        assert len(registry) == 0
        # No task of the stream outlives it.
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("dragoman-xds")]

    with caplog.at_level(logging.INFO):
        run(scenario)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_per_type_cluster_stream_serves_and_pushes() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
        async with serving(cache) as (_, registry, channel):
            call = cds_pb2_grpc.ClusterDiscoveryServiceStub(channel).StreamClusters()
            await call.write(request(CLUSTER, node=NODE))
            cds = await read(call)
            assert names_in(cds) == ["a"]
            assert registry.streams()[0].service == "CDS"
            await call.write(ack(cds))
            cache.set_snapshots({ALL_GATEWAYS: with_clusters("a", "b")})
            assert names_in(await read(call)) == ["a", "b"]
            # Another type on this stream is a protocol error.
            await call.write(request(LISTENER))
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await read(call)
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    run(scenario)


def test_stream_waits_for_the_first_snapshot() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        async with serving(cache) as (_, _, channel):
            call = ads(channel)
            await call.write(request(CLUSTER, node=NODE))
            pending = asyncio.ensure_future(read(call))
            await asyncio.sleep(0.1)
            assert not pending.done()
            cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
            assert names_in(await pending) == ["a"]
            call.cancel()

    run(scenario)


def test_node_naming_a_missing_gateway_gets_nothing_until_it_appears(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: with_clusters("a", "b")})
        async with serving(cache) as (_, registry, channel):
            call = ads(channel)
            await call.write(request(CLUSTER, node=GATEWAY_NODE))
            first = await read(call)
            # Fails closed: not every Gateway's clusters, none.
            assert names_in(first) == []
            assert registry.streams()[0].group == "default/gateway"
            await call.write(ack(first))
            cache.set_snapshots(
                {ALL_GATEWAYS: with_clusters("a", "b"), "default/gateway": with_clusters("b")}
            )
            assert names_in(await read(call)) == ["b"]
            assert registry.streams()[0].group == "default/gateway"
            # Deleted again: the node's clusters go, they are not replaced by everyone's.
            cache.set_snapshots({ALL_GATEWAYS: with_clusters("a", "b")})
            assert names_in(await read(call)) == []
            call.cancel()

    with caplog.at_level(logging.INFO, logger="dragoman.xds"):
        run(scenario)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    missing = [m for m in warnings if "Gateway 'default/gateway' does not exist" in m]
    # Once when it connected, once when the Gateway went away again.
    assert len(missing) == 2 and all("envoy-8" in m for m in missing), warnings
    assert any("Gateway 'default/gateway' exists now" in r.getMessage() for r in caplog.records)


def test_delta_ads_serves_and_pushes() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
        async with serving(cache) as (_, registry, channel):
            stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
            call = stub.DeltaAggregatedResources()
            await call.write(DeltaDiscoveryRequest(type_url=CLUSTER, node=NODE))
            first = await asyncio.wait_for(call.read(), TIMEOUT)
            assert isinstance(first, DeltaDiscoveryResponse)
            assert [r.name for r in first.resources] == ["a"]
            (stream,) = registry.streams()
            assert stream.delta and stream.service == "ADS"
            await call.write(DeltaDiscoveryRequest(type_url=CLUSTER, response_nonce=first.nonce))
            cache.set_snapshots({ALL_GATEWAYS: with_clusters("b")})
            added = await asyncio.wait_for(call.read(), TIMEOUT)
            removed = await asyncio.wait_for(call.read(), TIMEOUT)
            assert [r.name for r in added.resources] == ["b"]
            assert list(removed.removed_resources) == ["a"]
            call.cancel()

    run(scenario)


def test_fetch_is_unimplemented_with_a_clear_message() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: first_snapshot()})
        async with serving(cache) as (_, _, channel):
            stub = cds_pb2_grpc.ClusterDiscoveryServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.FetchClusters(request(CLUSTER, node=NODE), timeout=TIMEOUT)
            assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert "Fetch" in (raised.value.details() or "")

    run(scenario)


def test_address_in_use_is_a_clear_error() -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        server = await start_xds_server(cache, "127.0.0.1:0")
        try:
            with pytest.raises(XdsAddressError, match="in use"):
                await start_xds_server(cache, f"127.0.0.1:{bound_port(server)}")
        finally:
            await server.stop(None)

    run(scenario)


def test_quiet_stream_survives_client_keepalive_pings() -> None:
    # Envoy pings its xDS connection; gRPC's default server policy would answer an idle
    # stream's pings with a "too_many_pings" GOAWAY after about five of them.
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: with_clusters("a")})
        server = await start_xds_server(cache, "127.0.0.1:0")
        pinging = [
            ("grpc.keepalive_time_ms", 1200),
            ("grpc.keepalive_timeout_ms", 1000),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        address = f"127.0.0.1:{bound_port(server)}"
        try:
            async with grpc.aio.insecure_channel(address, options=pinging) as channel:
                call = ads(channel)
                await call.write(request(CLUSTER, node=NODE))
                await read(call)
                pending = asyncio.ensure_future(call.read())
                await asyncio.sleep(7.5)
                assert not pending.done()
                cache.set_snapshots({ALL_GATEWAYS: with_clusters("a", "b")})
                response = await asyncio.wait_for(pending, TIMEOUT)
                assert isinstance(response, DiscoveryResponse)
                assert names_in(response) == ["a", "b"]
                call.cancel()
        finally:
            await server.stop(None)

    run(scenario)
