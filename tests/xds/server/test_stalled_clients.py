"""Clients that never read: what they make the server hold is bounded, streams that make no
progress are closed, and a client going away is one line of log, not a traceback."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3 import ads_pb2_grpc

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.snapshots.resources import CLUSTER
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_io import GRPC_CORE_LOGGER, quiet_client_gone_in_core
from dragoman.xds.server.stream_loop import XdsCallbacks
from tests.support.xds_builders import eds_cluster, request, snapshot

ROOT = Path(__file__).resolve().parents[3]
STREAMS = 150
CLUSTERS = 6000  # a CDS response of about 1.5 MiB

# The server in a process of its own, so that its RSS is its own: it prints its port, then
# its RSS (MiB) and how many streams are open each time a line arrives on stdin.
SERVER = """
import asyncio, sys
from dragoman.dag.model import ALL_GATEWAYS
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import eds_cluster, snapshot

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

async def main():
    cache = SnapshotCache()
    cache.set_snapshots({ALL_GATEWAYS: snapshot(
        clusters=[eds_cluster(f"default/service-{i:05d}/8080") for i in range(CLUSTERS)])})
    registry = StreamRegistry()
    limits = XdsLimits(first_responses_in_flight=8, stall_timeout_s=300)
    server = await start_xds_server(cache, "127.0.0.1:0", registry=registry, limits=limits)
    print(bound_port(server), flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        print(round(rss()), len(registry), flush=True)
    await server.stop(None)

asyncio.run(main())
""".replace("CLUSTERS", str(CLUSTERS))

# A client that never reads: no BDP probing, so its receive window stays at 64 KiB.
CLIENT_OPTIONS = [("grpc.http2.bdp_probe", 0)]


def ask(server: subprocess.Popen[str]) -> tuple[int, int]:
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("\n")
    server.stdin.flush()
    rss, streams = server.stdout.readline().split()
    return int(rss), int(streams)


async def never_reading(port: int, count: int) -> list[grpc.aio.Channel]:
    channels = []
    for i in range(count):
        # One connection each, as each Envoy has its own.
        channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[*CLIENT_OPTIONS, ("dragoman.test.channel", i)]
        )
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
        await call.write(request(CLUSTER, node=Node(id=f"stalled-{i}", cluster="edge")))
        channels.append(channel)
    return channels


def test_streams_that_never_read_do_not_grow_the_server_past_a_bound() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        before, _ = ask(server)

        async def scenario() -> int:
            channels = await never_reading(port, STREAMS)
            deadline = time.monotonic() + 60
            while ask(server)[1] < STREAMS and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            await asyncio.sleep(3)  # every stream that may write has written what it could
            after, _ = ask(server)
            for channel in channels:
                await channel.close()
            return after

        after = asyncio.run(asyncio.wait_for(scenario(), 120))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    # Each stream writing its first response holds a copy of it in gRPC (1.5 MiB): 150 of
    # them would hold 225 MiB; 8 at a time hold 12.
    assert after - before < 80, f"RSS grew from {before} to {after} MiB"


def test_a_stream_that_makes_no_progress_is_closed() -> None:
    stalled: list[str] = []

    async def scenario() -> None:
        cache = SnapshotCache()
        cache.set_snapshots(
            {ALL_GATEWAYS: snapshot(clusters=[eds_cluster(f"s{i}") for i in range(CLUSTERS)])}
        )
        callbacks = XdsCallbacks(on_stalled=lambda stream: stalled.append(stream.node_id))
        limits = XdsLimits(stall_timeout_s=1.0)
        server = await start_xds_server(cache, "127.0.0.1:0", callbacks=callbacks, limits=limits)
        try:
            channels = await never_reading(bound_port(server), 3)
            deadline = asyncio.get_running_loop().time() + 20
            while len(stalled) < 3:
                assert asyncio.get_running_loop().time() < deadline, stalled
                await asyncio.sleep(0.1)
            for channel in channels:
                await channel.close()
        finally:
            await server.stop(None)

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert sorted(stalled) == ["stalled-0", "stalled-1", "stalled-2"]


def test_a_client_going_away_mid_write_is_one_line_of_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        cache = SnapshotCache()
        cache.set_snapshots(
            {ALL_GATEWAYS: snapshot(clusters=[eds_cluster(f"s{i}") for i in range(CLUSTERS)])}
        )
        server = await start_xds_server(cache, "127.0.0.1:0")
        try:
            channels = await never_reading(bound_port(server), 5)
            await asyncio.sleep(1)  # the writes are pending: nothing is read
            for channel in channels:
                await channel.close()
            await asyncio.sleep(1)
        finally:
            await server.stop(None)

    with caplog.at_level(logging.INFO):
        asyncio.run(asyncio.wait_for(scenario(), 60))
    tracebacks = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, [r.getMessage() for r in tracebacks]
    for i in range(5):
        lines = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.INFO
            and f"stalled-{i}" in r.getMessage()
            and " connected: " not in r.getMessage()
        ]
        assert len(lines) == 1 and "disconnected" in lines[0], lines


def test_grpcs_error_for_a_write_pending_at_the_end_is_one_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What gRPC's Cython layer logs when a stream ends with a write pending (the client went
    away mid-write; a race the test above can lose): not an error with a traceback."""

    class ExecuteBatchError(Exception):  # grpcio's class of that name, as the filter reads it
        pass

    quiet_client_gone_in_core()
    core = logging.getLogger(GRPC_CORE_LOGGER)
    with caplog.at_level(logging.DEBUG):
        try:
            raise ExecuteBatchError("Failed grpc_call_start_batch: 8")
        except ExecuteBatchError:
            core.exception("ExecuteBatchError raised in core by servicer method [/x]")
        try:
            raise ValueError("another failure")
        except ValueError:
            core.exception("a real error")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == ["a real error"]
    assert any("write pending" in r.getMessage() for r in caplog.records)
