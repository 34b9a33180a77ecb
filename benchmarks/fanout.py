"""Fan-out: how fast one dragoman pushes a changed snapshot to many xDS streams.

    python benchmarks/fanout.py                        # S = 100 and 1,000 ADS SotW streams
    python benchmarks/fanout.py --streams 1000 --delta # the same over delta ADS
    python benchmarks/fanout.py --streams 300 --clusters 5000 --updates 5

The server runs in this process (the real grpc.aio server, SnapshotCache and stream state
machines). Synthetic clients run in worker processes, each with many asyncio streams, one
gRPC connection per stream (as each Envoy has its own). Every client subscribes to CDS
(wildcard) on one node group holding `--clusters` EDS clusters and ACKs what it receives.

For each update one cluster changes; the time is measured from `set_snapshots` until every
stream has received the new version (client clocks; CLOCK_MONOTONIC is shared by the
processes) and until every ACK is back at the server. Reported: median and p99 over the
updates, the server's peak RSS, RSS per idle stream (RSS growth from before the clients
connected to all of them connected and idle, divided by S) and server CPU seconds per update.
It prints figures; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3 import ads_pb2_grpc
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryRequest,
    DiscoveryResponse,
)

from dragoman.envoy.core import ads_config_source, seconds
from dragoman.xds.cache import SnapshotCache
from dragoman.xds.registry import ConnectedStream, StreamRegistry
from dragoman.xds.resources import CLUSTER, Resource, Snapshot, TypeSnapshot
from dragoman.xds.server import XdsCallbacks, bound_port, start_xds_server
from dragoman.xds.sotw import Ack, StreamEvent

GROUP = "bench/gateway"
SETTLE_TIMEOUT_S = 120.0


# The snapshot.


def cluster(index: int, timeout_ms: int) -> Resource:
    name = f"bench/service-{index:05d}/8080"
    message = Cluster(
        name=name,
        type=Cluster.EDS,
        connect_timeout=seconds(timeout_ms / 1000),
        eds_cluster_config=Cluster.EdsClusterConfig(
            eds_config=ads_config_source(), service_name=name
        ),
    )
    message.common_lb_config.healthy_panic_threshold.value = 50
    return Resource.of(name, message)


def clusters_snapshot(count: int, update: int) -> Snapshot:
    """`count` EDS clusters; update N changes cluster N's connect timeout."""
    changed = update % count if update else -1
    resources = [cluster(i, 250 + update if i == changed else 250) for i in range(count)]
    return Snapshot(types={CLUSTER: TypeSnapshot.of(resources)})


# Server side.


@dataclass
class Progress:
    """ACKs the server has seen for the version being measured."""

    version: str = ""
    acked: set[int] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0
    ack_times: list[float] = field(default_factory=list)

    def on_event(self, stream: ConnectedStream, event: StreamEvent) -> None:
        if (
            isinstance(event, Ack)
            and event.version == self.version
            and stream.stream_id not in self.acked
        ):
            self.acked.add(stream.stream_id)
            self.ack_times.append(time.monotonic())
            if len(self.acked) >= self.expected:
                self.done.set()

    def expect(self, version: str, streams: int) -> None:
        self.version, self.expected = version, streams
        self.acked = set()
        self.ack_times = []
        self.done = asyncio.Event()


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def trimmed_rss_kib() -> int:
    """RSS after returning freed heap pages to the system (glibc), i.e. memory in use."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the plain RSS
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_kib()


@dataclass
class Result:
    streams: int
    clusters: int
    delta: bool
    received_s: list[float]  # per update: until every stream received it
    acked_s: list[float]  # per update: until every ACK was back
    stream_p50_s: list[float]  # per update: the median stream's receive latency
    cpu_s: list[float]  # per update: server CPU seconds
    rss_before_kib: int
    rss_idle_kib: int
    trimmed_before_kib: int
    trimmed_idle_kib: int
    peak_kib: int
    response_bytes: int


async def run_scenario(
    streams: int, clusters: int, updates: int, workers: int, delta: bool
) -> Result:
    cache = SnapshotCache()
    snapshots = [clusters_snapshot(clusters, u) for u in range(updates + 1)]
    cache.set_snapshots({GROUP: snapshots[0]})
    progress = Progress()
    registry = StreamRegistry()
    server = await start_xds_server(
        cache, "127.0.0.1:0", registry=registry, callbacks=XdsCallbacks(on_event=progress.on_event)
    )
    address = f"127.0.0.1:{bound_port(server)}"
    gc.collect()
    rss_before = rss_kib()
    trimmed_before = trimmed_rss_kib()
    progress.expect(snapshots[0].of_type(CLUSTER).version, streams)
    per_worker = [streams // workers + (1 if w < streams % workers else 0) for w in range(workers)]
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--worker",
            "--address",
            address,
            "--streams",
            str(count),
            "--worker-id",
            str(w),
            *(["--delta"] if delta else []),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for w, count in enumerate(per_worker)
        if count
    ]
    try:
        await asyncio.wait_for(progress.done.wait(), SETTLE_TIMEOUT_S)
        await asyncio.sleep(0.5)  # let every stream go idle
        gc.collect()
        rss_idle = rss_kib()
        trimmed_idle = trimmed_rss_kib()
        received_s, acked_s, cpu_s, starts = [], [], [], []
        for update in range(1, updates + 1):
            snap = snapshots[update]
            progress.expect(snap.of_type(CLUSTER).version, streams)
            cpu_before = time.process_time()
            started = time.monotonic()
            cache.set_snapshots({GROUP: snap})
            await asyncio.wait_for(progress.done.wait(), SETTLE_TIMEOUT_S)
            acked_s.append(time.monotonic() - started)
            cpu_s.append(time.process_time() - cpu_before)
            starts.append((snap.of_type(CLUSTER).version, started))
            await asyncio.sleep(0.3)
        # Each worker reports when each of its streams received each version.
        received: dict[str, list[float]] = {}
        for proc in procs:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(b"report\n")
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), SETTLE_TIMEOUT_S)
            for version, times in json.loads(line).items():
                received.setdefault(version, []).extend(times)
        stream_p50_s = []
        for version, started in starts:
            latencies = sorted(t - started for t in received.get(version, []))
            if len(latencies) < streams:
                raise RuntimeError(f"only {len(latencies)} of {streams} streams got {version}")
            received_s.append(latencies[-1])
            stream_p50_s.append(latencies[len(latencies) // 2])
        size = len(snapshots[-1].of_type(CLUSTER).resources)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
        await server.stop(None)
    return Result(
        streams,
        clusters,
        delta,
        received_s,
        acked_s,
        stream_p50_s,
        cpu_s,
        rss_before,
        rss_idle,
        trimmed_before,
        trimmed_idle,
        peak_rss_kib(),
        response_bytes=_full_response_bytes(snapshots[-1]) if size else 0,
    )


def _full_response_bytes(snap: Snapshot) -> int:
    response = DiscoveryResponse(
        version_info=snap.of_type(CLUSTER).version,
        type_url=CLUSTER,
        resources=[r.any for r in snap.of_type(CLUSTER).resources.values()],
    )
    return response.ByteSize()


# Client side (worker processes).


class Recorder:
    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}

    def record(self, version: str) -> None:
        self.times.setdefault(version, []).append(time.monotonic())


async def sotw_client(address: str, node: Node, recorder: Recorder, ready: asyncio.Event) -> None:
    channel = grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
    call = stub.StreamAggregatedResources()
    await call.write(DiscoveryRequest(type_url=CLUSTER, node=node))
    async for response in call:
        assert isinstance(response, DiscoveryResponse)
        recorder.record(response.version_info)
        await call.write(
            DiscoveryRequest(
                type_url=CLUSTER, version_info=response.version_info, response_nonce=response.nonce
            )
        )
        ready.set()


async def delta_client(address: str, node: Node, recorder: Recorder, ready: asyncio.Event) -> None:
    channel = grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
    call = stub.DeltaAggregatedResources()
    await call.write(DeltaDiscoveryRequest(type_url=CLUSTER, node=node))
    async for response in call:
        assert isinstance(response, DeltaDiscoveryResponse)
        recorder.record(response.system_version_info)
        await call.write(DeltaDiscoveryRequest(type_url=CLUSTER, response_nonce=response.nonce))
        ready.set()


async def worker(address: str, streams: int, worker_id: int, delta: bool) -> None:
    recorder = Recorder()
    client = delta_client if delta else sotw_client
    readies = [asyncio.Event() for _ in range(streams)]
    tasks = [
        asyncio.create_task(
            client(address, Node(id=f"bench-{worker_id}-{i}", cluster=GROUP), recorder, ready)
        )
        for i, ready in enumerate(readies)
    ]
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.readline()  # "report"
    sys.stdout.write(json.dumps(recorder.times) + "\n")
    sys.stdout.flush()
    for task in tasks:
        task.cancel()


# Output.


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def report(result: Result) -> None:
    kind = "delta ADS" if result.delta else "SotW ADS"
    per_stream = (result.rss_idle_kib - result.rss_before_kib) / result.streams
    in_use = (result.trimmed_idle_kib - result.trimmed_before_kib) / result.streams
    print(
        f"S={result.streams:>5} streams ({kind}), {result.clusters} clusters, "
        f"{len(result.received_s)} updates; "
        f"initial (full) CDS response {result.response_bytes / 1024:.0f} KiB"
    )
    print(
        f"  all streams received: median {statistics.median(result.received_s):.3f} s, "
        f"p99 {p99(result.received_s):.3f} s   "
        f"(median stream: {statistics.median(result.stream_p50_s):.3f} s)"
    )
    print(
        f"  all ACKs back:        median {statistics.median(result.acked_s):.3f} s, "
        f"p99 {p99(result.acked_s):.3f} s"
    )
    print(
        f"  server CPU per update: median {statistics.median(result.cpu_s):.3f} s, "
        f"max {max(result.cpu_s):.3f} s"
    )
    print(
        f"  server RSS: {result.rss_before_kib / 1024:.1f} MiB before clients, "
        f"{result.rss_idle_kib / 1024:.1f} MiB with all idle, "
        f"peak {result.peak_kib / 1024:.1f} MiB; "
        f"{per_stream:.1f} KiB per idle stream"
    )
    print(f"  after malloc_trim (memory in use): {in_use:.1f} KiB per idle stream")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, action="append", help="S (repeatable)")
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=9)
    parser.add_argument("--workers", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--delta", action="store_true", help="delta ADS instead of SotW ADS")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--worker-id", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(worker(args.address, args.streams[0], args.worker_id, args.delta))
        return 0
    sizes = args.streams or [100, 1000]
    if len(sizes) > 1:
        # One process per S, so each starts from a fresh heap and its own peak RSS.
        print(f"dragoman fan-out benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        sys.stdout.flush()
        for streams in sizes:
            again = [a for a in sys.argv[1:] if not a.startswith("--streams")]
            code = subprocess.call([sys.executable, __file__, *again, "--streams", str(streams)])
            if code:
                return code
        return 0
    result = asyncio.run(
        run_scenario(sizes[0], args.clusters, args.updates, args.workers, args.delta)
    )
    report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
