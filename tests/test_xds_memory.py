"""Memory per idle stream stays small: what a stream holds is shared, not copied.

An idle wildcard stream on 1,000 clusters holds references to the snapshot's own mappings
(SotW) or to one shared digest map (delta), not a copy of its own. Measured with
tracemalloc (Python allocations); benchmarks/fanout.py measures the whole process RSS.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Callable

import pytest
from envoy.config.core.v3.base_pb2 import Node

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.xds.cache import SnapshotCache
from dragoman.xds.delta import DeltaStream
from dragoman.xds.registry import StreamRegistry
from dragoman.xds.resources import CLUSTER, Snapshot
from dragoman.xds.sotw import SotwStream
from tests.xds_builders import ack, delta_ack, delta_request, eds_cluster, request, snapshot
from tests.xds_client import XdsClient, xds_channel

CLUSTERS = 1000
STREAMS = 100


def many_clusters(timeout_s: int = 1) -> Snapshot:
    return snapshot(clusters=[eds_cluster(f"c{i:04d}", timeout_s=timeout_s) for i in range(1000)])


def measure(make_streams: Callable[[], list[object]]) -> float:
    """Python heap bytes per stream that `make_streams` leaves alive."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        streams = make_streams()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(streams) == STREAMS
    return (after - before) / STREAMS


def idle_sotw_streams(first: Snapshot, second: Snapshot) -> list[object]:
    streams = []
    for i in range(STREAMS):
        stream = SotwStream()
        (cds,) = stream.on_request(request(CLUSTER, node=Node(id=f"n{i}")), first)
        stream.on_request(ack(cds), first)
        (cds,) = stream.on_snapshot(second)  # a push, ACKed: idle again
        stream.on_request(ack(cds), second)
        stream.take_events()
        streams.append(stream)
    return streams


def idle_delta_streams(first: Snapshot, second: Snapshot) -> list[object]:
    streams = []
    for i in range(STREAMS):
        stream = DeltaStream()
        (cds,) = stream.on_request(delta_request(CLUSTER, node=Node(id=f"n{i}")), first)
        stream.on_request(delta_ack(cds), first)
        (cds,) = stream.on_snapshot(second)
        stream.on_request(delta_ack(cds), second)
        stream.take_events()
        streams.append(stream)
    return streams


@pytest.mark.parametrize(
    "idle_streams", [idle_sotw_streams, idle_delta_streams], ids=["sotw", "delta"]
)
def test_memory_per_idle_stream_is_small(idle_streams: Callable[..., list[object]]) -> None:
    first, second = many_clusters(), many_clusters(timeout_s=2)
    idle_streams(first, second)  # warm the shared bodies and digest maps
    per_stream = measure(lambda: idle_streams(first, second))
    # A private copy of what 1,000 clusters map to would be over 36 KiB on its own.
    assert per_stream < 8 * 1024, f"{per_stream / 1024:.1f} KiB per idle stream"


def test_memory_per_idle_grpc_stream_is_small() -> None:
    """The whole Python side of a served stream: state machine, tasks, gRPC call objects."""

    async def scenario() -> float:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: many_clusters()})
        registry = StreamRegistry()
        async with xds_channel(cache, registry=registry) as channel:
            warm = XdsClient(channel, Node(id="warm"))
            await warm.subscribe(CLUSTER)
            await warm.receive_acked()
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            clients = []
            for i in range(STREAMS):
                client = XdsClient(channel, Node(id=f"e{i}"))
                await client.subscribe(CLUSTER)
                await client.receive_acked()
                clients.append(client)
            deadline = asyncio.get_running_loop().time() + 10
            while any(s.protocol.types[CLUSTER].in_flight for s in registry.streams()):
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            for client in [warm, *clients]:
                client.cancel()
        # Client and server share this process: the figure counts both sides.
        return (after - before) / STREAMS

    per_stream = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert per_stream < 64 * 1024, f"{per_stream / 1024:.1f} KiB per idle stream"
