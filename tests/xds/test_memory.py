"""Memory stays small: what a stream holds is shared, not copied, and what the server
remembers across changes is bounded and lets go of what it no longer serves.

An idle wildcard stream on 1,000 clusters holds references to the snapshot's own mappings
(SotW) or to one shared digest map (delta), not a copy of its own; so does one subscribed
to every CLA by name. Measured with tracemalloc (Python allocations);
benchmarks/fanout.py measures the whole process RSS.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tracemalloc
from collections.abc import Callable

import pytest
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.dag.model import ALL_GATEWAYS, HttpsListener, TlsFilterChain
from dragoman.envoy.translate_options import DEFAULT_OPTIONS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.envoy.translation.translated import listener_resource
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.digest_maps import RECENT_MAPS
from dragoman.xds.protocol.sized_lru import SizedLru
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.stream_protocol import StreamMemos
from dragoman.xds.protocol.wire import DeltaResponse, SotwResponse
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import (
    ack,
    delta_ack,
    delta_nack,
    delta_request,
    eds_cluster,
    endpoints,
    listener,
    request,
    routes,
    snapshot,
)
from tests.support.xds_client import XdsClient, xds_channel

CLUSTERS = 1000
STREAMS = 100
# What the streams of one cache share, as a server's streams do.
MEMOS = StreamMemos()


def many_clusters(timeout_s: int = 1) -> Snapshot:
    return snapshot(clusters=[eds_cluster(f"c{i:04d}", timeout_s=timeout_s) for i in range(1000)])


def retained(work: Callable[[], object]) -> tuple[int, object]:
    """Python heap bytes still allocated after `work` (its result aside), and the result."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, result


def measure(make_streams: Callable[[], list[object]]) -> float:
    """Python heap bytes per stream that `make_streams` leaves alive."""
    growth, streams = retained(make_streams)
    assert isinstance(streams, list) and len(streams) == STREAMS
    return growth / STREAMS


def idle_sotw_streams(first: Snapshot, second: Snapshot) -> list[object]:
    streams = []
    for i in range(STREAMS):
        stream = SotwStream(memos=MEMOS)
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
        stream = DeltaStream(memos=MEMOS)
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
        cache = SnapshotCache(per_type=PerTypeConfigSources())
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


# Envoy's usual subscription: every cluster (wildcard) and, by name, every cluster's CLA.

EDS_STREAMS = 50


def clusters_and_endpoints() -> Snapshot:
    names = [f"default/service-{i:04d}/8080" for i in range(CLUSTERS)]
    return snapshot(
        clusters=[eds_cluster(n) for n in names],
        assignments=[endpoints(n, "10.0.0.1") for n in names],
    )


def from_the_wire(message: DiscoveryRequest | DeltaDiscoveryRequest) -> object:
    """The request as a stream gets it: names freshly decoded, as gRPC hands them over."""
    return type(message).FromString(message.SerializeToString())


def idle_sotw_eds_streams(snap: Snapshot) -> list[object]:
    names = sorted(snap.of_type(ENDPOINT).resources)
    streams = []
    for i in range(EDS_STREAMS):
        stream = SotwStream(memos=MEMOS)
        (cds,) = stream.on_request(request(CLUSTER, node=Node(id=f"n{i}")), snap)
        stream.on_request(ack(cds), snap)
        (eds,) = stream.on_request(from_the_wire(request(ENDPOINT, names)), snap)
        stream.on_request(from_the_wire(ack(eds, names)), snap)
        stream.take_events()
        streams.append(stream)
    return streams


def idle_delta_eds_streams(snap: Snapshot) -> list[object]:
    names = sorted(snap.of_type(ENDPOINT).resources)
    streams = []
    for i in range(EDS_STREAMS):
        stream = DeltaStream(memos=MEMOS)
        (cds,) = stream.on_request(delta_request(CLUSTER, node=Node(id=f"n{i}")), snap)
        stream.on_request(delta_ack(cds), snap)
        (eds,) = stream.on_request(from_the_wire(delta_request(ENDPOINT, names)), snap)
        stream.on_request(delta_ack(eds), snap)
        stream.take_events()
        streams.append(stream)
    return streams


@pytest.mark.parametrize(
    "idle_streams", [idle_sotw_eds_streams, idle_delta_eds_streams], ids=["sotw", "delta"]
)
def test_memory_per_idle_stream_subscribed_to_every_cla_is_small(
    idle_streams: Callable[[Snapshot], list[object]],
) -> None:
    snap = clusters_and_endpoints()
    idle_streams(snap)  # warm the shared bodies and maps
    growth, streams = retained(lambda: idle_streams(snap))
    assert isinstance(streams, list) and len(streams) == EDS_STREAMS
    per_stream = growth / EDS_STREAMS
    # Its own 1,000 decoded names and a private name -> CLA map alone would be over 100 KiB.
    assert per_stream < 8 * 1024, f"{per_stream / 1024:.1f} KiB per idle stream"


# What the server remembers across changes.


def test_bodies_of_versions_no_longer_served_are_let_go() -> None:
    clusters = [eds_cluster(f"c{i:04d}") for i in range(CLUSTERS)]

    def version(update: int) -> Snapshot:
        changed = list(clusters)
        changed[update % CLUSTERS] = eds_cluster(f"c{update % CLUSTERS:04d}", timeout_s=update + 2)
        return snapshot(clusters=changed)

    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: version(0)})
    stream = SotwStream(memos=cache.memos)
    (cds,) = stream.on_request(
        request(CLUSTER, node=Node(id="n")), cache.snapshot_for(ALL_GATEWAYS)
    )
    stream.on_request(ack(cds), cache.snapshot_for(ALL_GATEWAYS))

    def updates(first: int, count: int) -> None:
        for update in range(first, first + count):
            cache.set_snapshots({ALL_GATEWAYS: version(update)})
            current = cache.snapshot_for(ALL_GATEWAYS)
            for response in stream.on_snapshot(current):
                stream.on_request(ack(response), current)

    updates(1, 2)
    growth, _ = retained(lambda: updates(3, 40))
    # Forty full-state CDS bodies of 1,000 clusters were made; about one is still served.
    assert growth < 3 * len(cds.to_bytes()), f"{growth / 1024:.0f} KiB kept"


def test_a_quiet_server_lets_go_of_response_bodies_and_encodes_them_again() -> None:
    served = snapshot(clusters=[eds_cluster(f"c{i:04d}") for i in range(CLUSTERS)])
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: served})
    (first,) = SotwStream(memos=cache.memos).on_request(
        request(CLUSTER, node=Node(id="e1")), cache.snapshot_for(ALL_GATEWAYS)
    )
    assert len(cache.memos.bodies.lru) == 1
    body = first.to_bytes()
    holders = sys.getrefcount(body)
    cache.release_bodies()
    assert len(cache.memos.bodies.lru) == 0
    assert cache.memos.bodies.lru.bytes == 0
    assert sys.getrefcount(body) == holders - 1  # the cache's reference is gone
    (again,) = SotwStream(memos=cache.memos).on_request(
        request(CLUSTER, node=Node(id="e2")), cache.snapshot_for(ALL_GATEWAYS)
    )
    assert again.to_bytes() is not first.to_bytes()
    again_message, first_message = again.message(), first.message()
    assert int(again_message.nonce) > int(first_message.nonce)  # drawn when encoded again
    again_message.nonce = first_message.nonce
    assert again_message == first_message


def test_response_bodies_are_bounded_by_bytes() -> None:
    cache: SizedLru[int, bytes] = SizedLru(10_000, len)
    for key in range(100):
        cache.put(key, bytes(1000))
    assert cache.bytes <= 10_000 and len(cache) == 10
    assert cache.get(99) is not None and cache.get(0) is None
    cache.put(100, bytes(50_000))  # one body over the bound still stays: it is in use
    assert len(cache) == 1 and cache.get(100) is not None
    assert SnapshotCache().memos.bodies.lru.max_bytes <= 64 * 1024 * 1024


def big_listener(index: int) -> Resource:
    """A listener of about 40 KiB: a gateway with many TLS hostnames."""
    chains = tuple(
        TlsFilterChain((f"h{host}-{index}.example.com",), (), f"routes-{index}")
        for host in range(200)
    )
    return listener_resource(HttpsListener(f"listener-{index}", 443, chains), DEFAULT_OPTIONS)


def test_per_type_variants_keep_no_old_bodies() -> None:
    rewrites = PerTypeConfigSources()

    def churn(first: int) -> None:
        for index in range(first, first + 150):
            resource = big_listener(index)
            assert resource.references == (f"routes-{index}",)
            served = Snapshot(types={LISTENER: TypeSnapshot.of([resource])})
            rewritten = rewrites.per_type(served, delta=False)
            assert rewritten.of_type(LISTENER).resources[resource.name] is not resource

    size = len(big_listener(0).body)
    churn(1000)  # warm, with other listeners
    growth, _ = retained(lambda: churn(0))
    # 150 distinct listeners went through; a handful of the last rewritten ones may stay.
    assert growth < 20 * size, f"{growth / 1024:.0f} KiB kept, listeners of {size / 1024:.0f} KiB"


def test_a_delta_stream_holds_the_shared_digest_map_from_its_first_response_on() -> None:
    """The first answer of a whole snapshot, its ACK, a push of the shared diff and its ACK:
    `held` and `acked` are the snapshot's shared digest map at every step, never a copy the
    stream made of 1,000 names (what each Envoy connecting at 10,000 Services would cost)."""
    memos = StreamMemos()
    first, second = many_clusters(), many_clusters(timeout_s=2)
    stream = DeltaStream(memos=memos)
    state_of = lambda: stream.types[CLUSTER]  # noqa: E731
    (cds,) = stream.on_request(delta_request(CLUSTER, node=Node(id="n")), first)
    shared_first = memos.digest_maps.digests_of(first.of_type(CLUSTER))
    assert len(cds.names) == CLUSTERS and state_of().held.mapping is shared_first
    stream.on_request(delta_ack(cds), first)
    assert state_of().acked.mapping is shared_first and not state_of().pending
    (cds,) = stream.on_snapshot(second)
    shared_second = memos.digest_maps.digests_of(second.of_type(CLUSTER))
    assert len(cds.names) == CLUSTERS and state_of().held.mapping is shared_second
    assert state_of().acked.mapping is shared_first  # until the client says it applied the push
    stream.on_request(delta_ack(cds), second)
    assert state_of().acked.mapping is shared_second


def test_a_nacked_first_delta_response_is_taken_back_and_sent_again() -> None:
    """With `held` shared, a NACK still puts back what the client held (nothing), and the
    next request gets every resource again once their content changes."""
    first, second = many_clusters(), many_clusters(timeout_s=2)
    stream = DeltaStream(memos=StreamMemos())
    (cds,) = stream.on_request(delta_request(CLUSTER, node=Node(id="n")), first)
    stream.on_request(delta_nack(cds, "rejected"), first)
    state = stream.types[CLUSTER]
    assert dict(state.held) == {} and dict(state.acked) == {}
    assert set(state.rejected) == set(cds.names)
    (again,) = stream.on_snapshot(second)
    assert len(again.names) == CLUSTERS


@pytest.mark.parametrize("stream_type", [SotwStream, DeltaStream], ids=["sotw", "delta"])
def test_a_stream_keeps_the_node_without_the_extensions_envoy_lists(
    stream_type: type[SotwStream] | type[DeltaStream],
) -> None:
    """Envoy's node names its 500-odd extensions (60 KB on the wire, 120 KiB parsed); the
    stream keeps everything else the node says, for routing, logs and CSDS."""
    node = Node(id="envoy-1", cluster="default/gw", user_agent_name="envoy")
    node.user_agent_build_version.version.major_number = 1
    node.metadata.fields["zone"].string_value = "a"
    node.client_features.append("envoy.lb.does_not_support_overprovisioning")
    for i in range(500):
        extension = node.extensions.add(name=f"envoy.filters.example_{i}", category="filters")
        extension.type_urls.append(f"type.googleapis.com/example.v3.Config{i}")
    assert node.ByteSize() > 30_000
    stream = stream_type(memos=StreamMemos())
    make = delta_request if stream_type is DeltaStream else request
    stream.on_request(make(CLUSTER, node=node), many_clusters())
    assert stream.node is not None and not stream.node.extensions
    expected = Node()
    expected.CopyFrom(node)
    expected.ClearField("extensions")
    assert stream.node == expected
    assert stream.node.ByteSize() < 500


# After a burst of changes: what each stream holds is the current snapshot's own mappings
# (SotW) or its shared digest maps (delta), as when it was idle before; nothing per version.

BURST = 30


class Burst:
    """A world of CLUSTERS EDS clusters, their CLAs, one listener and its route config; each
    change moves one cluster's timeout and its CLA's endpoints, every fifth renames one (the
    old cluster removed, the routes sent to the new one). Unchanged resources are the same
    objects from one snapshot to the next, as the incremental build keeps them."""

    def __init__(self) -> None:
        self.names = [f"c{i:04d}" for i in range(CLUSTERS)]
        self.clusters = {n: eds_cluster(n) for n in self.names}
        self.assignments = {n: endpoints(n, "10.0.0.1") for n in self.names}
        self.snapshots = [self._snapshot()]
        for change in range(1, BURST + 1):
            index = change * 37 % CLUSTERS
            name = self.names[index]
            if change % 5 == 0:
                renamed = f"{name}-{change}"
                self.names[index] = renamed
                del self.clusters[name], self.assignments[name]
                name = renamed
            self.clusters[name] = eds_cluster(name, timeout_s=change + 1)
            self.assignments[name] = endpoints(name, f"10.0.1.{change}")
            self.snapshots.append(self._snapshot())

    def _snapshot(self) -> Snapshot:
        names = sorted(self.names)
        return snapshot(
            clusters=[self.clusters[n] for n in names],
            assignments=[self.assignments[n] for n in names],
            listeners=[LISTENER_HTTP],
            route_configs=[routes("routes-http", *names)],
        )


LISTENER_HTTP = listener("http", "routes-http")


def sotw_envoy(stream: SotwStream, responses: list[SotwResponse], snap: Snapshot) -> None:
    """Answer as Envoy on ADS: ask for the CLAs of the clusters a CDS response carries (before
    ACKing it) and for the route config of the listener; ACK everything."""
    queue = list(responses)
    while queue:
        response = queue.pop(0)
        if response.type_url == CLUSTER:
            clusters = list(response.resources)
            eds = stream.types.get(ENDPOINT)
            if eds is None or set(eds.names) != set(clusters):
                nonce = eds.nonce if eds is not None else ""
                version = eds.acked_version if eds is not None else ""
                queue += stream.on_request(
                    request(ENDPOINT, clusters, version=version, nonce=nonce), snap
                )
        if response.type_url == LISTENER and ROUTE not in stream.types:
            queue += stream.on_request(request(ROUTE, ["routes-http"]), snap)
        names = {ENDPOINT: stream.types[ENDPOINT].names, ROUTE: ["routes-http"]}
        queue += stream.on_request(ack(response, names.get(response.type_url, ())), snap)


def delta_envoy(stream: DeltaStream, responses: list[DeltaResponse], snap: Snapshot) -> None:
    """The same over delta: subscribe the CLAs of added clusters, unsubscribe removed ones."""
    queue = list(responses)
    while queue:
        response = queue.pop(0)
        if response.type_url == CLUSTER:
            eds = stream.types.get(ENDPOINT)
            held = set(eds.names) if eds is not None else set()
            added = [n for n in response.names if n not in held]
            gone = [n for n in response.removed if n in held]
            if added or gone:
                queue += stream.on_request(delta_request(ENDPOINT, added, gone), snap)
        if response.type_url == LISTENER and ROUTE not in stream.types:
            queue += stream.on_request(delta_request(ROUTE, ["routes-http"]), snap)
        queue += stream.on_request(delta_ack(response), snap)


def burst_streams(
    world: Burst, count: int, memos: StreamMemos, *, delta: bool
) -> list[SotwStream | DeltaStream]:
    """`count` Envoy-like ADS streams connected to the first snapshot, then every change of
    the burst pushed to each and answered; all idle at the end."""
    first = world.snapshots[0]
    streams: list[SotwStream | DeltaStream] = []
    for i in range(count):
        if delta:
            stream: SotwStream | DeltaStream = DeltaStream(memos=memos)
            opening = delta_request(CLUSTER, node=Node(id=f"n{i}"))
            delta_envoy(stream, stream.on_request(opening, first), first)
            delta_envoy(stream, stream.on_request(delta_request(LISTENER), first), first)
        else:
            stream = SotwStream(memos=memos)
            sotw_envoy(
                stream, stream.on_request(request(CLUSTER, node=Node(id=f"n{i}")), first), first
            )
            sotw_envoy(stream, stream.on_request(request(LISTENER), first), first)
        streams.append(stream)
    for current in world.snapshots[1:]:
        for stream in streams:
            if isinstance(stream, DeltaStream):
                delta_envoy(stream, stream.on_snapshot(current), current)
            else:
                sotw_envoy(stream, stream.on_snapshot(current), current)
    for stream in streams:
        stream.take_events()
    return streams


@pytest.fixture(scope="module")
def burst() -> Burst:
    return Burst()


def test_sotw_streams_after_a_burst_hold_the_snapshot_s_own_mappings(burst: Burst) -> None:
    last = burst.snapshots[-1]
    for stream in burst_streams(burst, 3, StreamMemos(), delta=False):
        assert isinstance(stream, SotwStream)
        for type_url in (CLUSTER, ENDPOINT, LISTENER, ROUTE):
            state, current = stream.types[type_url], last.of_type(type_url)
            assert not state.in_flight, type_url
            assert state.sent.mapping is current.resources, type_url  # no copy of its own
            assert state.unacked == {}, type_url
        for type_url in (CLUSTER, LISTENER):
            assert stream.types[type_url].acked_sent is last.of_type(type_url).resources
        # Renamed clusters were kept until the routes naming their successors were ACKed.
        assert stream.types[CLUSTER].retained == {}


def test_delta_streams_after_a_burst_hold_the_shared_digest_maps(burst: Burst) -> None:
    memos = StreamMemos()
    last = burst.snapshots[-1]
    for stream in burst_streams(burst, 3, memos, delta=True):
        assert isinstance(stream, DeltaStream)
        for type_url in (CLUSTER, ENDPOINT, LISTENER, ROUTE):
            state = stream.types[type_url]
            shared = memos.digest_maps.digests_of(last.of_type(type_url))
            assert not state.pending and not state.deferred_removals, type_url
            assert state.held.mapping is shared and state.acked.mapping is shared, type_url
    # A map per type held now, and a few recent ones: none per version of the burst.
    assert len(memos.digest_maps) <= 4 * RECENT_MAPS < BURST


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_memory_per_stream_after_a_burst_is_small(burst: Burst, delta: bool) -> None:
    """What a burst leaves per stream: the growth with 25 streams less that with 5 (what
    every stream shares, the bodies and maps of the last versions, is in both)."""

    def growth(count: int) -> int:
        memos = StreamMemos()
        burst_streams(burst, 1, memos, delta=delta)  # the shared encodings, made once
        grown, streams = retained(lambda: burst_streams(burst, count, memos, delta=delta))
        assert isinstance(streams, list) and len(streams) == count
        return grown

    per_stream = (growth(25) - growth(5)) / 20
    # A private copy of 1,000 names and digests (or resources) alone is over 36 KiB.
    assert per_stream < 8 * 1024, f"{per_stream / 1024:.1f} KiB per stream after {BURST} changes"


def test_sotw_streams_let_go_of_an_equal_earlier_snapshot_after_a_full_build(
    burst: Burst,
) -> None:
    """A full build makes new objects of unchanged content (same versions): an idle stream is
    sent nothing, and holds the new snapshot's mappings, so the earlier snapshot's resources
    are not kept alive by every stream that connected while it was served."""
    before = burst.snapshots[-1]
    rebuilt = Snapshot(
        types={
            type_url: TypeSnapshot.of(
                Resource.of_bytes(r.name, r.type_url, bytes(r.body))
                for r in typed.resources.values()
            )
            for type_url, typed in before.types.items()
        }
    )
    assert rebuilt.of_type(CLUSTER).version == before.of_type(CLUSTER).version
    for stream in burst_streams(burst, 2, StreamMemos(), delta=False):
        assert isinstance(stream, SotwStream)
        assert stream.on_snapshot(rebuilt) == []
        for type_url in (CLUSTER, ENDPOINT, LISTENER, ROUTE):
            sent = stream.types[type_url].sent
            assert sent.mapping is rebuilt.of_type(type_url).resources, type_url
        for type_url in (CLUSTER, LISTENER):
            state = stream.types[type_url]
            assert state.acked_sent is state.sent_batch is rebuilt.of_type(type_url).resources


def test_activity_moves_while_a_client_is_still_being_answered() -> None:
    """The memory trimmer waits for the registry's activity to be still: a connected client
    still asking (an Envoy applying 10,000 clusters, then asking for listeners and routes)
    moves it, and an answered, ACKed one does not."""

    async def scenario() -> list[tuple[int, int]]:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: many_clusters()})
        registry = StreamRegistry()
        seen = [registry.activity()]
        async with xds_channel(cache, registry=registry) as channel:
            client = XdsClient(channel, Node(id="envoy"))
            await client.subscribe(CLUSTER)
            received = await client.receive()
            seen.append(registry.activity())  # connected and asked once
            await client.ack(received)
            await client.nothing()
            seen.append(registry.activity())  # its ACK read
            await client.nothing()
            seen.append(registry.activity())  # quiet
            client.cancel()
        return seen

    (empty, asked, acked, quiet) = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert empty == (0, 0)
    assert asked == (1, 1)
    assert acked == (1, 2) and quiet == acked


def test_the_registry_counts_streams_that_closed() -> None:
    """The memory trimmer hands back what closed streams held once their closes stop, however
    busy the server: the registry counts each stream once, when it goes."""

    async def scenario() -> tuple[int, int, int]:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: many_clusters()})
        registry = StreamRegistry()
        async with xds_channel(cache, registry=registry) as channel:
            clients = [XdsClient(channel, Node(id=f"envoy-{i}")) for i in range(3)]
            for client in clients:
                await client.subscribe(CLUSTER)
                await client.receive()
            before = registry.closed
            for client in clients[:2]:
                client.cancel()
            for _ in range(200):
                if registry.closed == 2:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            return before, registry.closed, len(registry)

    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == (0, 2, 1)
