"""Fan-out: how fast one dragoman pushes a changed snapshot to many xDS streams.

    python benchmarks/fanout.py                        # S = 100 and 1,000 ADS SotW streams
    python benchmarks/fanout.py --streams 1000 --delta # the same over delta ADS
    python benchmarks/fanout.py --eds                  # each stream also subscribes every CLA
    python benchmarks/fanout.py --matrix               # CDS-only and EDS, SotW and delta
    python benchmarks/fanout.py --matrix --tls both    # each of those plaintext, then mTLS
    python benchmarks/fanout.py --streams 300 --clusters 5000 --updates 5
    python benchmarks/fanout.py --grpc-services 2000 --grpc-services 10000
    python benchmarks/fanout.py --storm --streams 10000 --clusters 10000   # reconnect storm

The server runs in this process (the real grpc.aio server, SnapshotCache and stream state
machines). Synthetic clients run in worker processes, each with many asyncio streams, one
gRPC connection per stream (as each Envoy has its own). Every client subscribes to CDS
(wildcard) on one node group holding `--clusters` EDS clusters and ACKs what it receives;
with `--eds`, it also subscribes by name to every cluster's ClusterLoadAssignment, as Envoy
does. A client reads every response whole but parses only its version, type URL and nonce
(`response_head`), what its ACK needs: 2,500 clients holding their last response parsed
would hold 10 GB in one worker process, and the machine is shared with the server. For the
same reason each client costs what an Envoy would, no more: its HTTP/2 connection has Envoy's
flow control (a 256 MiB window from the start, no pings: gRPC's own client pings on data it
receives, and the server answers each ping with two writes), and it reads into buffers
reused from the heap, as Envoy's allocator does (glibc maps and faults in every 1 MB one).

For each update one cluster changes (with `--eds`, its CLA too); the time is measured from
`set_snapshots` until every stream has received the new version (of CDS; with `--eds`, of
EDS, which ADS sends after CDS) and until every ACK is back at the server (client clocks;
CLOCK_MONOTONIC is shared by the processes). Reported: median and p99 over the updates, the
server's peak RSS, RSS per idle stream (RSS growth from before the clients connected to all
of them connected and idle, divided by S), the same once the updates are over and every
stream is idle again (as the updates left it, and after malloc_trim: what stays) and server
CPU seconds per update.

`--tls on` serves over mutual TLS (certificates from `dragoman.security.certgen`, every client
with the fleet identity, each stream its own TLS connection); `--tls both` runs every scenario
in plaintext and then over mutual TLS, so the two can be read side by side.
`--handshake-timeout S` sets the server's bound on a connection's handshakes (5 s by
default, as `dragoman serve`). The clients share the server's cores: at 10,000 TLS clients on
two cores, they cannot finish their own handshakes within 5 s, and the server closes them.

`--storm` instead runs a reconnect storm, as after a replica died and its clients all came to
this one: one well-behaved stream is connected and served, then S streams connect at once while
one cluster changes every `--storm-update-every` seconds (1 by default). Over delta, each new
stream names what it holds (initial_resource_versions: the snapshot as the storm began, what
the replica that went away served), as Envoy does, and is sent only what differs;
`--storm-fresh` makes them hold nothing (a fleet starting). Clients whose stream
the server closes or refuses open it again after a jittered backoff, as Envoy does. Reported:
the seconds until every new stream has ACKed an answer that leaves it holding every cluster
(the whole type, or what differs from what it named), how long each update took to reach
the well-behaved stream meanwhile (a version superseded before it was sent counts until a later
one arrived), and the server's RSS before, at its peak (sampled every 50 ms) and with every
stream idle.

`--grpc-services N` instead times the proxyless gRPC clients' translation of N Services (the
synthetic store of benchmarks/translate.py) and how long the event loop stalls while it
runs, inline and off the loop (`SnapshotCache.prepare`, what the server does).
It prints figures; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import dataclasses
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.core.v3.address_pb2 import Address, SocketAddress
from envoy.config.core.v3.base_pb2 import Node
from envoy.config.endpoint.v3.endpoint_components_pb2 import (
    Endpoint,
    LbEndpoint,
    LocalityLbEndpoints,
)
from envoy.config.endpoint.v3.endpoint_pb2 import ClusterLoadAssignment
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DiscoveryRequest,
)
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from dragoman.envoy.resources.common_messages import seconds
from dragoman.envoy.resources.config_sources import ads_config_source
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.runtime.controller import UpdateResult
from dragoman.runtime.memory import serve_large_buffers_from_heap
from dragoman.runtime.metrics import Metrics
from dragoman.security.files import TlsFiles
from dragoman.security.files_store import write_files
from dragoman.snapshots.gc_pause import settle_for_serving
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, Resource, Snapshot, TypeSnapshot
from dragoman.xds.protocol.events import Ack, StreamEvent
from dragoman.xds.protocol.wire import ResponseBodies
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_loop import XdsCallbacks
from dragoman.xds.server.stream_registry import ConnectedStream, StreamRegistry
from dragoman.xds.transport.credentials import RotatingServerCredentials

GROUP = "bench/gateway"
SETTLE_TIMEOUT_S = 120.0
# A worker's report is one line: every stream's receive time of every version (2,500 streams
# x 10 versions is about 0.5 MB).
REPORT_LIMIT_BYTES = 64 * 1024 * 1024
# Envoy's HTTP/2 receive window for a stream and for its connection, by default.
ENVOY_WINDOW_BYTES = 256 * 1024 * 1024


# The snapshot.


def cluster_name(index: int) -> str:
    return f"bench/service-{index:05d}/8080"


def cluster(index: int, timeout_ms: int) -> Resource:
    name = cluster_name(index)
    message = Cluster(
        name=name,
        type=Cluster.EDS,
        connect_timeout=seconds(timeout_ms / 1000),
        eds_cluster_config=Cluster.EdsClusterConfig(
            eds_config=ads_config_source(), service_name=name
        ),
    )
    message.common_lb_config.healthy_panic_threshold.value = 50
    return Resource.of(name, message, references=(name,))


def assignment(index: int, generation: int) -> Resource:
    """Three endpoints; `generation` moves the last one."""
    name = cluster_name(index)
    addresses = [f"10.{index >> 8 & 255}.{index & 255}.{n}" for n in (1, 2, 3 + generation)]
    locality = LocalityLbEndpoints(
        lb_endpoints=[
            LbEndpoint(
                endpoint=Endpoint(
                    address=Address(socket_address=SocketAddress(address=a, port_value=8080))
                )
            )
            for a in addresses
        ]
    )
    locality.load_balancing_weight.value = 1
    return Resource.of(name, ClusterLoadAssignment(cluster_name=name, endpoints=[locality]))


def bench_snapshot(count: int, update: int, eds: bool) -> Snapshot:
    """`count` EDS clusters (and their CLAs with `eds`); update N changes cluster N's
    connect timeout and CLA N's endpoints."""
    changed = update % count if update else -1
    clusters = [cluster(i, 250 + update if i == changed else 250) for i in range(count)]
    types = {CLUSTER: TypeSnapshot.of(clusters)}
    if eds:
        assignments = [assignment(i, update if i == changed else 0) for i in range(count)]
        types[ENDPOINT] = TypeSnapshot.of(assignments)
    return Snapshot(types=types)


def measured_type(eds: bool) -> str:
    """The type whose arrival ends an update: EDS comes after CDS on ADS."""
    return ENDPOINT if eds else CLUSTER


# Server side.


@dataclass
class Progress:
    """ACKs the server has seen for the version being measured."""

    type_url: str = CLUSTER
    version: str = ""
    acked: set[int] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0
    ack_times: list[float] = field(default_factory=list)

    def on_event(self, stream: ConnectedStream, event: StreamEvent) -> None:
        if (
            isinstance(event, Ack)
            and event.type_url == self.type_url
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


# The server's own bound on a connection's handshakes, as `dragoman serve` has it.
SERVER_HANDSHAKE_TIMEOUT_S = XdsLimits().handshake_timeout_s


@dataclass(frozen=True)
class Scenario:
    streams: int
    clusters: int
    updates: int
    workers: int
    delta: bool
    eds: bool
    metrics: bool = False  # the server counts with dragoman's Prometheus metrics hooks
    metrics_services: int = 10_000  # Services in the store behind the reported scrape
    tls: bool = False
    storm: bool = False  # every stream connects at once beside a well-behaved one
    storm_update_every_s: float = 1.0  # an update is published this often during the storm
    # Delta storm clients that hold nothing yet (a fleet starting, not one failing over).
    storm_fresh: bool = False
    # The server's handshake bound (its own default unless --handshake-timeout says otherwise).
    handshake_timeout_s: float = SERVER_HANDSHAKE_TIMEOUT_S


@dataclass
class Result:
    scenario: Scenario
    received_s: list[float]  # per update: until every stream received it
    acked_s: list[float]  # per update: until every ACK was back
    stream_p50_s: list[float]  # per update: the median stream's receive latency
    cpu_s: list[float]  # per update: server CPU seconds
    rss_before_kib: int
    rss_idle_kib: int
    trimmed_before_kib: int
    trimmed_idle_kib: int
    peak_kib: int
    # After the last update, every stream idle again: as the updates left it (freed pages
    # still held by the allocator), then after malloc_trim (memory in use).
    rss_after_kib: int
    trimmed_after_kib: int
    response_bytes: int
    scrape: str = ""  # with --metrics: the /metrics scrape with every stream connected
    # Streams the server closed or refused, opened again by their clients, by status.
    reconnects: Counter[str] = dataclasses.field(default_factory=Counter)


async def run_scenario(scenario: Scenario) -> Result:
    streams = scenario.streams
    type_url = measured_type(scenario.eds)
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    snapshots = [
        bench_snapshot(scenario.clusters, u, scenario.eds) for u in range(scenario.updates + 1)
    ]
    cache.set_snapshots({GROUP: snapshots[0]})
    progress = Progress(type_url)
    registry = StreamRegistry()
    metrics = Metrics() if scenario.metrics else None
    callbacks = XdsCallbacks(on_event=progress.on_event)
    if metrics is not None:
        metrics.state.streams = registry
        hooks = metrics.xds_callbacks()
        assert hooks.on_event is not None
        on_event = hooks.on_event

        def both(stream: ConnectedStream, event: StreamEvent) -> None:
            on_event(stream, event)
            progress.on_event(stream, event)

        callbacks = dataclasses.replace(hooks, on_event=both)
    server, address, tls_dir = await serving(scenario, cache, registry, callbacks)
    gc.collect()
    rss_before = rss_kib()
    trimmed_before = trimmed_rss_kib()
    progress.expect(snapshots[0].of_type(type_url).version, streams)
    procs = await spawn_workers(address, tls_dir, scenario, streams)
    try:
        await asyncio.wait_for(progress.done.wait(), SETTLE_TIMEOUT_S)
        await asyncio.sleep(0.5)  # let every stream go idle
        gc.collect()
        rss_idle = rss_kib()
        trimmed_idle = trimmed_rss_kib()
        received_s, acked_s, cpu_s, starts = [], [], [], []
        for update in range(1, scenario.updates + 1):
            snap = snapshots[update]
            version = snap.of_type(type_url).version
            progress.expect(version, streams)
            cpu_before = time.process_time()
            started = time.monotonic()
            if metrics is not None:  # what the controller's observer does on each publication
                metrics.built(UpdateResult("full", 0.0))
            cache.set_snapshots({GROUP: snap})
            await asyncio.wait_for(progress.done.wait(), SETTLE_TIMEOUT_S)
            acked_s.append(time.monotonic() - started)
            cpu_s.append(time.process_time() - cpu_before)
            starts.append((version, started))
            await asyncio.sleep(0.3)
        gc.collect()
        rss_after = rss_kib()
        trimmed_after = trimmed_rss_kib()
        received, reconnects = await received_times(procs)
        stream_p50_s = []
        for version, started in starts:
            latencies = sorted(t - started for t in received.get(version, []))
            if len(latencies) < streams:
                raise RuntimeError(f"only {len(latencies)} of {streams} streams got {version}")
            received_s.append(latencies[-1])
            stream_p50_s.append(latencies[len(latencies) // 2])
        scrape = scraped(metrics, scenario.metrics_services) if metrics is not None else ""
    finally:
        await stopped(procs, server, tls_dir)
    return Result(
        scenario,
        received_s,
        acked_s,
        stream_p50_s,
        cpu_s,
        rss_before,
        rss_idle,
        trimmed_before,
        trimmed_idle,
        peak_rss_kib(),
        rss_after,
        trimmed_after,
        response_bytes=_full_response_bytes(snapshots[-1]),
        scrape=scrape,
        reconnects=reconnects,
    )


async def serving(
    scenario: Scenario, cache: SnapshotCache, registry: StreamRegistry, callbacks: XdsCallbacks
) -> tuple[grpc.aio.Server, str, str]:
    """The xDS server (over mutual TLS with `scenario.tls`), its address, its TLS directory."""
    tls_dir = tempfile.mkdtemp(prefix="dragoman-fanout-") if scenario.tls else ""
    credentials = None
    if tls_dir:
        write_files(Path(tls_dir), server_names=("localhost",), days=1)
        credentials = RotatingServerCredentials(
            TlsFiles(*(Path(tls_dir) / name for name in ("server.crt", "server.key", "ca.crt")))
        )
    # A fleet over the default connection bound raises it, as `serve --xds-max-connections`
    # would (the storm's well-behaved stream and a few spare besides).
    default = XdsLimits().max_connections or 0
    limits = XdsLimits(
        max_connections=max(default, scenario.streams + 10),
        handshake_timeout_s=scenario.handshake_timeout_s,
    )
    server = await start_xds_server(
        cache,
        "127.0.0.1:0",
        registry=registry,
        callbacks=callbacks,
        tls=credentials,
        limits=limits,
    )
    settle_for_serving()  # as `dragoman serve` does once its start-up is done
    serve_large_buffers_from_heap()  # as its memory trimmer does (the figures trim by hand)
    # With TLS, the name the server certificate carries.
    return server, f"{'localhost' if tls_dir else '127.0.0.1'}:{bound_port(server)}", tls_dir


async def spawn_workers(
    address: str,
    tls_dir: str,
    scenario: Scenario,
    streams: int,
    first_id: int = 0,
    held_file: str = "",
) -> list[asyncio.subprocess.Process]:
    """Worker processes (`scenario.workers` at most) that open `streams` streams at once;
    with `held_file`, delta streams that hold what it names (`--held`)."""
    workers = scenario.workers
    per_worker = [streams // workers + (1 if w < streams % workers else 0) for w in range(workers)]
    return [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--worker",
            "--address",
            address,
            "--worker-id",
            str(first_id + w),
            *(["--tls-dir", tls_dir] if tls_dir else []),
            *(["--held", held_file] if held_file else []),
            *scenario_args(
                Scenario(
                    count,
                    scenario.clusters,
                    scenario.updates,
                    1,
                    scenario.delta,
                    scenario.eds,
                    tls=scenario.tls,
                )
            ),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=REPORT_LIMIT_BYTES,
        )
        for w, count in enumerate(per_worker)
        if count
    ]


async def received_times(
    procs: list[asyncio.subprocess.Process],
) -> tuple[dict[str, list[float]], Counter[str]]:
    """When each worker's streams received each version (version -> times), and how many
    times their streams were opened again after the server closed or refused them, by the
    status they ended with."""
    received: dict[str, list[float]] = {}
    reconnects: Counter[str] = Counter()
    for proc in procs:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"report\n")
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), SETTLE_TIMEOUT_S)
        report = json.loads(line)
        for version, times in report["times"].items():
            received.setdefault(version, []).extend(times)
        reconnects.update(report["reconnects"])
    return received, reconnects


async def stopped(
    procs: list[asyncio.subprocess.Process], server: grpc.aio.Server, tls_dir: str
) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    await server.stop(None)
    if tls_dir:
        shutil.rmtree(tls_dir, ignore_errors=True)


def scraped(metrics: Metrics, services: int) -> str:
    """A scrape while every stream is connected, with a controller holding `services`
    Services (translate.py's store) built: what Prometheus would read."""
    from translate import synthesize

    from dragoman.runtime.controller import Controller
    from dragoman.store import Store

    controller = Controller(SnapshotCache())
    controller.update(Store.from_objects(synthesize(services)))
    metrics.state.controller = controller
    started = time.perf_counter()
    text = metrics.exposition().decode()
    elapsed = time.perf_counter() - started
    print(f"  (scrape computed in {elapsed * 1000:.1f} ms)", file=sys.stderr)
    return text


def _full_response_bytes(snap: Snapshot) -> int:
    """The initial answers' sizes: full-state CDS (and every CLA with EDS)."""
    bodies = ResponseBodies()
    return sum(
        len(bodies.sotw_response(t, r.version, r.resources, 0, whole_type=True).to_bytes())
        for t, r in snap.types.items()
    )


# Client side (worker processes).


class Recorder:
    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        # Streams the server closed or refused, opened again, by the status they ended with.
        self.reconnects: Counter[str] = Counter()

    def record(self, version: str) -> None:
        self.times.setdefault(version, []).append(time.monotonic())


ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService/"


def _response_head_type() -> Any:
    """A message of the fields DiscoveryResponse and DeltaDiscoveryResponse share by number:
    the version (1), type URL (4) and nonce (5). A client parses a response as this and keeps
    those three strings: gRPC's stream iterator holds the last message it parsed until the
    next one comes, and a whole response of 10,000 clusters, parsed, holds 4 MB (2,500 idle
    clients: 10 GB in one worker process). The resources still cross the wire."""
    proto = descriptor_pb2.FileDescriptorProto(name="fanout_head.proto", package="fanout")
    head = proto.message_type.add(name="ResponseHead")
    for name, number in (("version", 1), ("type_url", 4), ("nonce", 5)):
        head.field.add(
            name=name,
            number=number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("fanout.ResponseHead"))


_ResponseHead = _response_head_type()


def response_head(data: bytes) -> tuple[str, str, str]:
    """(version, type URL, nonce) of a serialized (Delta)DiscoveryResponse."""
    head = _ResponseHead.FromString(data)
    return head.version, head.type_url, head.nonce


def ads_call(channel: grpc.aio.Channel, delta: bool) -> Any:
    """An ADS stream (delta or SotW) whose responses come as `response_head`s."""
    method = "DeltaAggregatedResources" if delta else "StreamAggregatedResources"
    return channel.stream_stream(
        ADS + method,
        request_serializer=serialized,
        response_deserializer=response_head,
    )()


def serialized(request: Message | bytes) -> bytes:
    """A request's bytes; given bytes, those: a request serialized once for many streams."""
    return request if isinstance(request, bytes) else request.SerializeToString()


def client_channel(address: str, tls_dir: str) -> grpc.aio.Channel:
    # A subchannel pool per channel: one connection (and TLS session) per stream, as Envoys.
    # Flow control as Envoy's HTTP/2 codec does it: a 256 MiB receive window from the start
    # and no pings. gRPC's own client probes the bandwidth with a PING on data it receives,
    # which the server answers with a PING ACK and a WINDOW_UPDATE: two writes per push
    # that no Envoy asks for.
    options = [
        ("grpc.use_local_subchannel_pool", 1),
        ("grpc.http2.bdp_probe", 0),
        ("grpc.http2.lookahead_bytes", ENVOY_WINDOW_BYTES),
    ]
    if not tls_dir:
        return grpc.aio.insecure_channel(address, options=options)
    files = [(Path(tls_dir) / name).read_bytes() for name in ("ca.crt", "fleet.key", "fleet.crt")]
    return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(*files), options=options)


async def sotw_client(
    address: str,
    node: Node,
    eds_names: list[str],
    recorder: Recorder,
    ready: asyncio.Event,
    tls_dir: str = "",
) -> None:
    async with client_channel(address, tls_dir) as channel:
        call = ads_call(channel, delta=False)
        measured = measured_type(bool(eds_names))
        await call.write(DiscoveryRequest(type_url=CLUSTER, node=node))
        asked_for_endpoints = False
        async for version, type_url, nonce in call:
            if type_url == measured:
                recorder.record(version)
            names = eds_names if type_url == ENDPOINT else []
            await call.write(
                DiscoveryRequest(
                    type_url=type_url,
                    version_info=version,
                    response_nonce=nonce,
                    resource_names=names,
                )
            )
            if eds_names and not asked_for_endpoints:
                # As Envoy: the clusters name their CLAs, which it then asks for.
                await call.write(DiscoveryRequest(type_url=ENDPOINT, resource_names=eds_names))
                asked_for_endpoints = True
            ready.set()


async def delta_client(
    address: str,
    node: Node,
    eds_names: list[str],
    recorder: Recorder,
    ready: asyncio.Event,
    tls_dir: str = "",
    held: Mapping[str, bytes] | None = None,
) -> None:
    """`held`: per type, what the client holds as it connects, which it names on the new
    stream as Envoy does: a serialized request of those initial_resource_versions alone
    (`holding`), to which each stream's own fields are appended (protobuf merges them)."""
    held = held or {}
    async with client_channel(address, tls_dir) as channel:
        call = ads_call(channel, delta=True)
        measured = measured_type(bool(eds_names))
        first = DeltaDiscoveryRequest(type_url=CLUSTER, node=node).SerializeToString()
        await call.write(held.get(CLUSTER, b"") + first)
        asked_for_endpoints = False
        async for version, type_url, nonce in call:
            if type_url == measured:
                recorder.record(version)
            await call.write(DeltaDiscoveryRequest(type_url=type_url, response_nonce=nonce))
            if eds_names and not asked_for_endpoints:
                subscribe = DeltaDiscoveryRequest(
                    type_url=ENDPOINT, resource_names_subscribe=eds_names
                ).SerializeToString()
                await call.write(held.get(ENDPOINT, b"") + subscribe)
                asked_for_endpoints = True
            ready.set()


def holding(versions: Mapping[str, Mapping[str, str]]) -> dict[str, bytes]:
    """Per type, a delta request naming these resource versions as held, serialized once:
    10,000 names make a 1 MB message, which every stream of a worker sends."""
    return {
        type_url: DeltaDiscoveryRequest(initial_resource_versions=held).SerializeToString()
        for type_url, held in versions.items()
    }


async def reconnecting(client: Any, recorder: Recorder, *args: Any) -> None:
    """`client(*args)`, opened again when the server closes or refuses it, after a jittered
    exponential backoff (0.5 s doubling up to 30 s), as Envoy's xDS client does."""
    attempt = 0
    while True:
        try:
            await client(*args)
            return
        except grpc.aio.AioRpcError as error:
            recorder.reconnects[error.code().name] += 1
            await asyncio.sleep(random.uniform(0, min(30.0, 0.5 * 2**attempt)))
            attempt += 1


async def worker(
    address: str, scenario: Scenario, worker_id: int, tls_dir: str = "", held_file: str = ""
) -> None:
    # Each 1 MB response is read into buffers that glibc would map, fault in page by page
    # and unmap again: a third of a client's CPU, on the server's cores. Envoy's allocator
    # (tcmalloc) reuses them, and so do these clients.
    serve_large_buffers_from_heap()
    recorder = Recorder()
    client = delta_client if scenario.delta else sotw_client
    eds_names = [cluster_name(i) for i in range(scenario.clusters)] if scenario.eds else []
    held = holding(json.loads(Path(held_file).read_text())) if held_file else None
    readies = [asyncio.Event() for _ in range(scenario.streams)]
    tasks = [
        asyncio.create_task(
            reconnecting(
                client,
                recorder,
                address,
                Node(id=f"bench-{worker_id}-{i}", cluster=GROUP),
                eds_names,
                recorder,
                ready,
                tls_dir,
                *([held] if held else []),
            )
        )
        for i, ready in enumerate(readies)
    ]
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.readline()  # "report"
    sys.stdout.write(json.dumps({"times": recorder.times, "reconnects": recorder.reconnects}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    for task in tasks:
        task.cancel()


# The reconnect storm.

STORM_TIMEOUT_S = 300.0


@dataclass
class Served:
    """Clients (node ids) that ACKed any version of the measured type: served in full at
    least once (a client whose stream was closed and opened again counts once)."""

    type_url: str
    streams: set[str] = field(default_factory=set)
    expected: int = 1
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def on_event(self, stream: ConnectedStream, event: StreamEvent) -> None:
        if isinstance(event, Ack) and event.type_url == self.type_url:
            self.streams.add(stream.node_id)
            if len(self.streams) >= self.expected:
                self.done.set()

    def expect(self, streams: int) -> None:
        self.expected = streams
        self.done = asyncio.Event()
        if len(self.streams) >= streams:
            self.done.set()


@dataclass
class StormResult:
    scenario: Scenario
    served_s: float  # from the storm's start until every stream had ACKed what it lacked
    steady_s: list[float]  # per update published meanwhile: until the steady stream had it
    missed: int  # of those updates, how many the steady stream never saw
    rss_before_kib: int
    rss_peak_kib: int  # sampled every 50 ms, until 1 s after the last stream was served
    rss_after_kib: int  # every stream connected and idle
    reconnects: Counter[str]  # streams the server closed or refused, opened again, by status


async def run_storm(scenario: Scenario) -> StormResult:
    """One well-behaved stream connected and served; then `scenario.streams` streams connect
    at once (the clients of a replica that died), while an update is published every
    `storm_update_every_s`: how long until every new stream is served, the RSS on the way,
    and how long each update takes to reach the well-behaved stream meanwhile."""
    type_url = measured_type(scenario.eds)
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    snapshot = bench_snapshot(scenario.clusters, 0, scenario.eds)
    cache.set_snapshots({GROUP: snapshot})
    served = Served(type_url)
    registry = StreamRegistry()
    server, address, tls_dir = await serving(
        scenario, cache, registry, XdsCallbacks(on_event=served.on_event)
    )
    procs = await spawn_workers(address, tls_dir, dataclasses.replace(scenario, workers=1), 1)
    scratch = Path(tempfile.mkdtemp(prefix="dragoman-storm-"))
    try:
        await asyncio.wait_for(served.done.wait(), SETTLE_TIMEOUT_S)
        steady = procs[0]
        gc.collect()
        rss_before = trimmed_rss_kib()
        peak = [rss_before]
        published: list[tuple[str, float]] = []
        served.expect(scenario.streams + 1)
        held_file = _held_file(snapshot, scenario, scratch)
        started = time.monotonic()
        procs += await spawn_workers(
            address, tls_dir, scenario, scenario.streams, first_id=1, held_file=held_file
        )
        sampling = asyncio.Event()
        sampler = asyncio.create_task(_sample_rss(peak, sampling))
        update = 0
        while not served.done.is_set():
            if time.monotonic() - started > STORM_TIMEOUT_S:
                raise RuntimeError(
                    f"{len(served.streams) - 1} of {scenario.streams} streams served in "
                    f"{STORM_TIMEOUT_S:.0f} s"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(served.done.wait(), scenario.storm_update_every_s)
            update += 1
            snapshot = _one_changed(snapshot, update, scenario)
            published.append((snapshot.of_type(type_url).version, time.monotonic()))
            cache.set_snapshots({GROUP: snapshot})
        served_s = time.monotonic() - started
        await asyncio.sleep(1.0)  # the last update reaches every stream
        sampling.set()
        await sampler
        gc.collect()
        rss_after = rss_kib()
        received, _ = await received_times([steady])
        steady_s, missed = _steady_latencies(published, received)
        _, reconnects = await received_times(procs[1:])
    finally:
        await stopped(procs, server, tls_dir)
        shutil.rmtree(scratch, ignore_errors=True)
    return StormResult(
        scenario, served_s, steady_s, missed, rss_before, max(peak), rss_after, reconnects
    )


def _held_file(snapshot: Snapshot, scenario: Scenario, scratch: Path) -> str:
    """For a delta storm, a file of what the clients hold as they come (what the replica
    that went away served them: the snapshot as the storm starts), per type and name; ""
    with `--storm-fresh`, and for SotW: a SotW stream's first answer is the whole type
    unless the client already holds the very version served now, which an update every
    second soon makes a rare case."""
    if not scenario.delta or scenario.storm_fresh:
        return ""
    types = [CLUSTER, ENDPOINT] if scenario.eds else [CLUSTER]
    held = {t: {name: r.digest for name, r in snapshot.of_type(t).resources.items()} for t in types}
    path = scratch / "held.json"
    path.write_text(json.dumps(held))
    return str(path)


def _one_changed(snapshot: Snapshot, update: int, scenario: Scenario) -> Snapshot:
    """`snapshot` with one cluster (and its CLA with --eds) changed: made in proportion to
    the change, as dragoman's controller does, so the storm's figures are the serving's."""
    index = update % scenario.clusters
    types = dict(snapshot.types)
    changed = cluster(index, 250 + update)
    types[CLUSTER] = snapshot.types[CLUSTER].replaced({changed.name: changed})
    if scenario.eds:
        moved = assignment(index, update)
        types[ENDPOINT] = snapshot.types[ENDPOINT].replaced({moved.name: moved})
    return Snapshot(types=types)


async def _sample_rss(peak: list[int], done: asyncio.Event) -> None:
    """Appends the RSS to `peak` every 50 ms until `done`."""
    while not done.is_set():
        peak.append(rss_kib())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 0.05)
    peak.append(rss_kib())


def _steady_latencies(
    published: list[tuple[str, float]], received: dict[str, list[float]]
) -> tuple[list[float], int]:
    """Per published version: until the steady stream received it or a later one (SotW may
    skip a version superseded before it was sent); and how many it never received at all."""
    latencies, missed = [], 0
    for position, (_, at) in enumerate(published):
        arrivals = [min(received[later]) for later, _ in published[position:] if later in received]
        if not arrivals:
            missed += 1
            continue
        latencies.append(min(arrivals) - at)
    return latencies, missed


def stream_kind(scenario: Scenario) -> str:
    """How the scenario's streams are served, as the reports name it."""
    kind = ("delta ADS" if scenario.delta else "SotW ADS") + (", mTLS" if scenario.tls else "")
    if scenario.handshake_timeout_s != SERVER_HANDSHAKE_TIMEOUT_S:
        kind += f", handshakes bounded at {scenario.handshake_timeout_s:g} s"
    return kind


def report_storm(result: StormResult) -> None:
    scenario = result.scenario
    kind = stream_kind(scenario)
    subscribed = "CDS + every CLA by name" if scenario.eds else "CDS only"
    held_note = ""
    if scenario.delta:
        held_note = (
            ", each holding nothing" if scenario.storm_fresh else ", each naming what it held"
        )
    print(
        f"storm: S={scenario.streams:>5} streams connecting at once ({kind}, {subscribed}"
        f"{held_note}), {scenario.clusters} clusters, one well-behaved stream beside them, "
        f"an update every {scenario.storm_update_every_s:g} s"
    )
    print(f"  every stream served in full: {result.served_s:.2f} s ({reopened(result.reconnects)})")
    steady = result.steady_s
    if steady:
        print(
            f"  well-behaved stream, {len(steady)} updates meanwhile: "
            f"median {statistics.median(steady):.3f} s, max {max(steady):.3f} s"
            f"{f', {result.missed} never received' if result.missed else ''}"
        )
    else:
        print("  well-behaved stream: no update was published meanwhile")
    print(
        f"  server RSS: {result.rss_before_kib / 1024:.1f} MiB before, peak "
        f"{result.rss_peak_kib / 1024:.1f} MiB during, {result.rss_after_kib / 1024:.1f} MiB "
        "with every stream idle"
    )


# The gRPC clients' translation: how long, and how long the event loop stalls.


async def grpc_translation(services: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from translate import endpoint_slice, synthesize  # benchmarks/translate.py

    from dragoman.dag.model import ALL_GATEWAYS
    from dragoman.runtime.controller import Controller
    from dragoman.store import Store
    from dragoman.xds.protocol.client_kind import grpc_group

    store = Store.from_objects(synthesize(services))
    moved = endpoint_slice(0, generation=1)
    slices = {**store.endpoint_slices, (moved.meta.namespace, moved.meta.name): moved}
    endpoints_changed = dataclasses.replace(store, endpoint_slices=slices)
    group = grpc_group(ALL_GATEWAYS)
    for mode in ("inline", "off the loop"):
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        controller = Controller(cache)
        controller.update(store)
        for step in ("first", "after one EndpointSlice changed"):
            if step != "first":
                controller.update(endpoints_changed)
            took, stall = await _timed_translation(cache, group, inline=mode == "inline")
            made = cache.snapshot_for(group)
            counts = ", ".join(
                f"{len(t.resources)} {name}"
                for name, t in zip(("CDS", "EDS", "LDS", "RDS"), made.types.values(), strict=False)
            )
            print(
                f"gRPC translation of {services} Services ({mode}, {step}): {took:.3f} s "
                f"({counts}); longest event-loop stall {stall:.3f} s"
            )


async def loop_lags(lags: list[float], stop: asyncio.Event) -> None:
    """How late the running loop wakes from each 5 ms sleep (seconds), until `stop` is set:
    how long it went without running (a stall of the process, its GIL or its collector)."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.005)
        lags.append(time.perf_counter() - started - 0.005)


async def _timed_translation(
    cache: SnapshotCache, group: str, *, inline: bool
) -> tuple[float, float]:
    """(seconds the translation took, the longest the event loop went without running)."""
    lags: list[float] = []
    stop = asyncio.Event()
    ticker = asyncio.create_task(loop_lags(lags, stop))
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    if inline:
        cache.snapshot_for(group)
    else:
        await cache.prepare(group)
    took = time.perf_counter() - started
    stop.set()
    await ticker
    return took, max(lags)


# Output.


def reopened(reconnects: Counter[str]) -> str:
    by_status = ", ".join(f"{count} {status}" for status, count in reconnects.most_common())
    return (
        f"{sum(reconnects.values())} streams closed or refused by the server and opened "
        f"again: {by_status or 'none'}"
    )


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def report(result: Result) -> None:
    scenario = result.scenario
    kind = stream_kind(scenario)
    subscribed = "CDS + every CLA by name" if scenario.eds else "CDS only"
    per_stream = (result.rss_idle_kib - result.rss_before_kib) / scenario.streams
    in_use = (result.trimmed_idle_kib - result.trimmed_before_kib) / scenario.streams
    print(
        f"S={scenario.streams:>5} streams ({kind}, {subscribed}), {scenario.clusters} clusters, "
        f"{len(result.received_s)} updates; "
        f"initial responses {result.response_bytes / 1024:.0f} KiB"
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
    if result.reconnects:
        print(f"  {reopened(result.reconnects)}")
    # What the updates left: per stream over the RSS before any client, so it also counts
    # what every stream shares (the new versions' bodies and digest maps); compare two S
    # to separate the two.
    updates = len(result.received_s)
    after = (result.rss_after_kib - result.rss_before_kib) / scenario.streams
    after_in_use = (result.trimmed_after_kib - result.trimmed_before_kib) / scenario.streams
    print(
        f"  after {updates} updates, all idle again: {result.rss_after_kib / 1024:.1f} MiB "
        f"({after:.1f} KiB per stream) as left; "
        f"{result.trimmed_after_kib / 1024:.1f} MiB ({after_in_use:.1f} KiB per stream) "
        "after malloc_trim"
    )
    if result.scrape:
        families = sum(1 for line in result.scrape.splitlines() if line.startswith("# TYPE"))
        series = sum(1 for line in result.scrape.splitlines() if not line.startswith("#"))
        print(
            f"  /metrics with {scenario.streams} streams connected and "
            f"{scenario.metrics_services:,} Services: {len(result.scrape.encode()):,} bytes, "
            f"{families} families, {series} samples"
        )


def scenario_args(scenario: Scenario) -> list[str]:
    """The command-line options that run exactly `scenario` (for a child process)."""
    return [
        "--streams",
        str(scenario.streams),
        "--clusters",
        str(scenario.clusters),
        "--updates",
        str(scenario.updates),
        "--workers",
        str(scenario.workers),
        *(["--delta"] if scenario.delta else []),
        *(["--eds"] if scenario.eds else []),
        *(
            ["--metrics", "--metrics-services", str(scenario.metrics_services)]
            if scenario.metrics
            else []
        ),
        *(["--tls", "on"] if scenario.tls else []),
        *(
            ["--storm", "--storm-update-every", str(scenario.storm_update_every_s)]
            if scenario.storm
            else []
        ),
        *(["--storm-fresh"] if scenario.storm_fresh else []),
        "--handshake-timeout",
        str(scenario.handshake_timeout_s),
    ]


def parser() -> argparse.ArgumentParser:
    doc = __doc__ or ""
    made = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    made.add_argument("--streams", type=int, action="append", help="S (repeatable)")
    made.add_argument("--clusters", type=int, default=1000)
    made.add_argument("--updates", type=int, default=9)
    made.add_argument("--workers", type=int, default=4, help="client processes (default 4)")
    made.add_argument("--delta", action="store_true", help="delta ADS instead of SotW ADS")
    made.add_argument("--eds", action="store_true", help="streams also subscribe every CLA")
    made.add_argument(
        "--matrix", action="store_true", help="every combination of --delta and --eds"
    )
    made.add_argument(
        "--metrics",
        action="store_true",
        help="count with dragoman's Prometheus metrics hooks, and report a /metrics scrape",
    )
    made.add_argument(
        "--metrics-services",
        type=int,
        default=10_000,
        help="Services in the store behind the scrape (default 10,000)",
    )
    made.add_argument(
        "--grpc-services",
        type=int,
        action="append",
        help="time the gRPC clients' translation of N Services instead (repeatable)",
    )
    made.add_argument(
        "--tls",
        choices=["off", "on", "both"],
        default="off",
        help="mutual TLS: off (default), on, or both (each scenario plaintext, then TLS)",
    )
    made.add_argument(
        "--storm",
        action="store_true",
        help="a reconnect storm: every stream connects at once beside a well-behaved one",
    )
    made.add_argument(
        "--storm-update-every",
        type=float,
        default=1.0,
        metavar="S",
        help="during the storm, one cluster changes every S seconds (default 1)",
    )
    made.add_argument(
        "--storm-fresh",
        action="store_true",
        help="delta storm clients hold nothing as they connect (a fleet starting), instead "
        "of what the replica that went away served them",
    )
    made.add_argument(
        "--handshake-timeout",
        type=float,
        default=SERVER_HANDSHAKE_TIMEOUT_S,
        metavar="S",
        help="the server's bound on a connection's handshakes (default: the server's own, "
        f"{SERVER_HANDSHAKE_TIMEOUT_S:g} s)",
    )
    made.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    made.add_argument("--tls-dir", default="", help=argparse.SUPPRESS)
    made.add_argument("--held", default="", help=argparse.SUPPRESS)
    made.add_argument("--address", help=argparse.SUPPRESS)
    made.add_argument("--worker-id", type=int, default=0, help=argparse.SUPPRESS)
    return made


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    """Every scenario the options ask for, one per S (and per mode with --matrix)."""
    modes = [(d, e) for e in (False, True) for d in (False, True)]
    if not args.matrix:
        modes = [(args.delta, args.eds)]
    securities = {"off": [False], "on": [True], "both": [False, True]}[args.tls]
    return [
        Scenario(
            streams,
            args.clusters,
            args.updates,
            args.workers,
            delta,
            eds,
            args.metrics,
            args.metrics_services,
            tls,
            args.storm,
            args.storm_update_every,
            args.storm_fresh,
            args.handshake_timeout,
        )
        for delta, eds in modes
        for streams in args.streams or [100, 1000]
        for tls in securities
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.grpc_services:
        for services in args.grpc_services:
            asyncio.run(grpc_translation(services))
        return 0
    wanted = scenarios(args)
    if args.worker:
        asyncio.run(worker(args.address, wanted[0], args.worker_id, args.tls_dir, args.held))
        return 0
    if len(wanted) == 1 and wanted[0].storm:
        report_storm(asyncio.run(run_storm(wanted[0])))
        return 0
    if len(wanted) == 1:
        report(asyncio.run(run_scenario(wanted[0])))
        return 0
    # One process per scenario, so each starts from a fresh heap and its own peak RSS.
    print(f"dragoman fan-out benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    sys.stdout.flush()
    for scenario in wanted:
        code = subprocess.call([sys.executable, __file__, *scenario_args(scenario)])
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
