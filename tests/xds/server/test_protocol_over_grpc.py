"""The xDS protocol over real gRPC, driven by a small client (tests/support/xds_client.py).

Ports the scenario list of go-control-plane's server tests (stale nonce, cancellation,
delta wildcard, multiple streams, concurrent snapshot sets, the legacy-wildcard matrix) and
the features of ii/xds-test-harness (acknack, delta, lds-cds, subscribing, unsubscribing).
Most scenarios run for both protocols: state of the world and delta.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
import pytest
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.events import Ack, Nack
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.wire import Response
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.snapshot_variants import ConfigSources
from dragoman.xds.server.stream_loop import XdsCallbacks
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import (
    delta_request,
    eds_cluster,
    endpoints,
    listener,
    names_in,
    per_type_snapshot,
    request,
    routes,
    snapshot,
)
from tests.support.xds_client import TIMEOUT, XdsClient, xds_channel

NODE = Node(id="envoy-p", cluster="gateways")
GRPC_NODE = Node(id="grpc-p", user_agent_name="gRPC C-core linux Python")
PROTOCOLS = pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


def base() -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("http", "routes-http")],
        route_configs=[routes("routes-http", "a", "b")],
    )


def cache_with(snap: Snapshot) -> SnapshotCache:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: snap})
    return cache


def digest(snap: Snapshot, type_url: str, name: str) -> str:
    return snap.of_type(type_url).resources[name].digest


async def until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


# Names each type is subscribed with: wildcard (none) for LDS/CDS, explicit for EDS/RDS.
SUBSCRIPTIONS = {CLUSTER: [], ENDPOINT: ["a", "b"], LISTENER: [], ROUTE: ["routes-http"]}
EXPECTED = {CLUSTER: ["a", "b"], ENDPOINT: ["a", "b"], LISTENER: ["http"], ROUTE: ["routes-http"]}


# go-control-plane: response handlers, aggregated handlers, request type.


@PROTOCOLS
def test_response_handlers_every_per_type_service(delta: bool) -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            for type_url, names in SUBSCRIPTIONS.items():
                client = XdsClient(channel, NODE, type_url=type_url, delta=delta)
                await client.subscribe(type_url, names)
                received = await client.receive()
                assert received.type_url == type_url and received.nonce
                assert received.names == EXPECTED[type_url]
                client.cancel()

    run(scenario)


@PROTOCOLS
def test_aggregated_handlers_every_type_on_one_ads_stream(delta: bool) -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            for type_url, names in SUBSCRIPTIONS.items():
                await client.subscribe(type_url, names)
                received = await client.receive_acked()
                assert (received.type_url, received.names) == (type_url, EXPECTED[type_url])
            await client.nothing()
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_aggregate_request_type_empty_is_invalid_argument(delta: bool) -> None:
    async def scenario() -> None:
        registry = StreamRegistry()
        async with xds_channel(cache_with(base()), registry=registry) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            raw = DeltaDiscoveryRequest(node=NODE) if delta else DiscoveryRequest(node=NODE)
            await client.send_raw(raw)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await client.receive()
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "type_url" in (raised.value.details() or "")
            await until(lambda: len(registry) == 0)

    run(scenario)


@PROTOCOLS
def test_per_type_stream_refuses_another_type(delta: bool) -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            client = XdsClient(channel, NODE, type_url=CLUSTER, delta=delta)
            await client.subscribe(LISTENER)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await client.receive()
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    run(scenario)


@PROTOCOLS
def test_opaque_requests_for_an_unknown_type_get_nothing(delta: bool) -> None:
    secret = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(secret, ["cert"])
            await client.nothing()
            # The stream still serves the types dragoman knows.
            await client.subscribe(CLUSTER)
            assert (await client.receive()).names == ["a", "b"]
            client.cancel()

    run(scenario)


# go-control-plane: stale nonce.


def test_stale_nonce_request_is_ignored() -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE)
            await client.subscribe(ENDPOINT, ["a"])
            first = await client.receive()
            # A request answering a response that is not the latest: not answered.
            await client.send_raw(request(ENDPOINT, ["a", "b"], nonce="stale"))
            await client.nothing()
            # The same request with the current nonce is answered.
            await client.send_raw(request(ENDPOINT, ["a", "b"], nonce=first.nonce))
            assert (await client.receive()).names == ["b"]
            client.cancel()

    run(scenario)


def test_delta_stale_nonce_still_changes_the_subscription() -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            client = XdsClient(channel, NODE, delta=True)
            await client.subscribe(ENDPOINT, ["a"])
            await client.receive()
            await client.send_raw(delta_request(ENDPOINT, ["b"], nonce="stale"))
            assert (await client.receive()).names == ["b"]
            client.cancel()

    run(scenario)


# go-control-plane: cancellations.


@PROTOCOLS
def test_cancellation_ends_the_stream_and_its_watch(delta: bool) -> None:
    async def scenario() -> None:
        registry = StreamRegistry()
        cache = cache_with(base())
        async with xds_channel(cache, registry=registry) as channel:
            gone = XdsClient(channel, NODE, delta=delta)
            stays = XdsClient(channel, Node(id="other"), delta=delta)
            for client in (gone, stays):
                await client.subscribe(CLUSTER)
                await client.receive_acked()
            await until(lambda: len(registry) == 2)
            gone.cancel()
            await until(lambda: len(registry) == 1)
            assert [s.node_id for s in registry.streams()] == ["other"]
            cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("c")])})
            assert "c" in (await stays.receive()).names
            assert not [t for t in asyncio.all_tasks() if t.get_name() == "dragoman-xds-read"][1:]
            stays.cancel()
            await until(lambda: len(registry) == 0)

    run(scenario)


@PROTOCOLS
def test_cancellation_by_a_new_subscription_replaces_the_watch(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(ENDPOINT, ["a"])
            await client.receive_acked()
            await client.unsubscribe(ENDPOINT, ["a"])
            await client.subscribe(ENDPOINT, ["b"])
            assert (await client.receive_acked()).names == ["b"]
            moved = snapshot(assignments=[endpoints("a", "10.9.9.9"), endpoints("b", "10.9.9.8")])
            cache.set_snapshots({ALL_GATEWAYS: moved})
            assert (await client.receive_acked()).names == ["b"]
            await client.nothing()
            client.cancel()

    run(scenario)


# go-control-plane: delta wildcard subscriptions.


def test_delta_wildcard_subscriptions() -> None:
    async def scenario() -> None:
        cache = cache_with(snapshot(clusters=[eds_cluster("a"), eds_cluster("b")]))
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, delta=True)
            await client.subscribe(CLUSTER, ["*", "a"])
            assert (await client.receive_acked()).names == ["a", "b"]
            # Unsubscribing "a" while the wildcard still covers it: it is sent again.
            await client.unsubscribe(CLUSTER, ["a"])
            assert (await client.receive_acked()).names == ["a"]
            # Wildcard only: a change to any cluster arrives.
            cache.set_snapshots(
                {ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a"), eds_cluster("c")])}
            )
            # Additions first, removals after (make-before-break, on ADS).
            added, removed = await client.receive_acked(), await client.receive_acked()
            assert (added.names, removed.removed) == (["c"], ("b",))
            # Explicit "c" only: the wildcard gone, "a" changes unnoticed.
            await client.subscribe(CLUSTER, ["c"])
            assert (await client.receive_acked()).names == ["c"]
            await client.unsubscribe(CLUSTER, ["*"])
            await client.nothing()
            changed = snapshot(clusters=[eds_cluster("a", timeout_s=5), eds_cluster("c")])
            cache.set_snapshots({ALL_GATEWAYS: changed})
            await client.nothing()
            client.cancel()

    run(scenario)


# go-control-plane: multiple streams, concurrent snapshot sets.


@PROTOCOLS
def test_multiple_streams_each_get_every_push_sharing_one_body(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        bodies: dict[int, set[int]] = {}

        def on_response(stream: object, response: Response) -> None:
            body = response.to_bytes()
            bodies.setdefault(len(bodies), set()).add(id(body))

        async with xds_channel(cache, callbacks=XdsCallbacks(on_response=on_response)) as channel:
            clients = [XdsClient(channel, Node(id=f"e{i}"), delta=delta) for i in range(20)]
            for client in clients:
                await client.subscribe(CLUSTER)
                await client.receive_acked()
            bodies.clear()
            grown = snapshot(clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")])
            cache.set_snapshots({ALL_GATEWAYS: grown})
            received = [await client.receive_acked() for client in clients]
            assert {r.version for r in received} == {grown.of_type(CLUSTER).version}
            assert len({id_ for ids in bodies.values() for id_ in ids}) == 1  # one encoding
            for client in clients:
                client.cancel()

    run(scenario)


@PROTOCOLS
def test_concurrent_snapshot_sets_converge(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        loop = asyncio.get_running_loop()
        async with xds_channel(cache) as channel:
            clients = [XdsClient(channel, Node(id=f"c{i}"), delta=delta) for i in range(5)]
            for client in clients:
                await client.subscribe(CLUSTER)
                await client.receive_acked()

            def publish(worker: int) -> None:
                for step in range(40):
                    snap = snapshot(clusters=[eds_cluster(f"w{worker}", timeout_s=step + 1)])
                    loop.call_soon_threadsafe(cache.set_snapshot, f"group-{worker}", snap)

            threads = [threading.Thread(target=publish, args=(w,)) for w in range(4)]
            for thread in threads:
                thread.start()
            final = snapshot(clusters=[eds_cluster("final")])
            for _ in range(20):  # the loop's own sets interleave with the threads'
                cache.set_snapshots({**{g: cache.snapshot_for(g) for g in cache.groups}})
                await asyncio.sleep(0)
            for thread in threads:
                thread.join()
            await asyncio.sleep(0.05)
            cache.set_snapshot(ALL_GATEWAYS, final)

            async def converged(client: XdsClient) -> None:
                while True:
                    received = await client.receive_acked()
                    if received.version == final.of_type(CLUSTER).version:
                        return

            await asyncio.gather(*(converged(c) for c in clients))
            assert all(cache.snapshot_for(f"group-{w}") is not None for w in range(4))
            for client in clients:
                client.cancel()

    run(scenario)


@PROTOCOLS
def test_snapshot_groups_per_node_cluster(delta: bool) -> None:
    async def scenario() -> None:
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots(
            {
                ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a"), eds_cluster("b")]),
                "default/one": snapshot(clusters=[eds_cluster("a")]),
                "default/two": snapshot(clusters=[eds_cluster("b")]),
            }
        )
        async with xds_channel(cache) as channel:
            seen = {}
            for group in ("default/one", "default/two", "default/none"):
                client = XdsClient(channel, Node(id="x", cluster=group), delta=delta)
                await client.subscribe(CLUSTER)
                seen[group] = (await client.receive()).names
                client.cancel()
            assert seen == {"default/one": ["a"], "default/two": ["b"], "default/none": []}

    run(scenario)


def test_callbacks_see_open_events_responses_and_close() -> None:
    async def scenario() -> None:
        log: list[str] = []
        callbacks = XdsCallbacks(
            on_open=lambda s: log.append(f"open {s.service}"),
            on_close=lambda s: log.append(f"close {s.node_id}"),
            on_event=lambda s, e: log.append(type(e).__name__),
            on_response=lambda s, r: log.append(f"response {r.type_url == CLUSTER}"),
        )
        async with xds_channel(cache_with(base()), callbacks=callbacks) as channel:
            client = XdsClient(channel, NODE)
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            await until(lambda: "Ack" in log)
            client.cancel()
            await until(lambda: log[-1] == "close envoy-p")
        assert log == ["open ADS", "response True", "Ack", "close envoy-p"]

    run(scenario)


def test_failing_callbacks_are_logged_and_end_nothing(caplog: pytest.LogCaptureFixture) -> None:
    # go-control-plane ends a stream whose callback returns an error; dragoman's callbacks
    # observe and cannot refuse, so one that raises is a bug logged at the call, and the
    # stream (requests, ACKs, pushes) goes on.
    def broken(*_: object) -> None:
        raise RuntimeError("callback bug")

    async def scenario() -> None:
        cache = cache_with(base())
        callbacks = XdsCallbacks(on_open=broken, on_event=broken, on_response=broken)
        registry = StreamRegistry()
        async with xds_channel(cache, callbacks=callbacks, registry=registry) as channel:
            client = XdsClient(channel, NODE)
            await client.subscribe(CLUSTER)
            first = await client.receive_acked()
            (stream,) = registry.streams()
            await until(lambda: stream.type_statuses()[0].acked_version == first.version)
            grown = snapshot(clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")])
            cache.set_snapshots({ALL_GATEWAYS: grown})
            assert (await client.receive_acked()).names == ["a", "b", "c"]
            await until(
                lambda: stream.type_statuses()[0].acked_version == grown.of_type(CLUSTER).version
            )
            client.cancel()

    run(scenario)
    failures = [r for r in caplog.records if "xDS callback" in r.getMessage()]
    # open, then per exchange: a response and its ACK event, twice.
    assert len(failures) == 5 and all(r.exc_info for r in failures)


# go-control-plane: the legacy-wildcard matrix (subscription_test.go), state-machine level.

FIRST_REQUESTS = {
    "empty": [],
    "star": ["*"],
    "names": ["a"],
    "star-and-names": ["*", "a"],
}


@pytest.mark.parametrize("type_url", [CLUSTER, LISTENER, ENDPOINT, ROUTE], ids=lambda t: t[-12:])
@pytest.mark.parametrize("first", list(FIRST_REQUESTS))
@PROTOCOLS
def test_legacy_wildcard_matrix(delta: bool, first: str, type_url: str) -> None:
    names = FIRST_REQUESTS[first]
    snap = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
        listeners=[listener("a", "r"), listener("b", "r")],
        route_configs=[routes("a", "x"), routes("b", "y")],
    )
    stream: SotwStream | DeltaStream
    if delta:
        stream = DeltaStream()
        responses = stream.on_request(delta_request(type_url, names, node=NODE), snap)
    else:
        stream = SotwStream()
        responses = stream.on_request(request(type_url, names, node=NODE), snap)
    full_state_type = type_url in (CLUSTER, LISTENER)
    wildcard = "*" in names or (not names and full_state_type)
    assert stream.types[type_url].wildcard is wildcard
    sent = [n for r in responses for n in names_in(r)]
    if wildcard:
        expected = ["a", "b"]
    elif names:
        expected = ["a"]
    else:
        expected = []
    assert sent == expected
    # SotW: once names were sent, an empty list means "nothing", never wildcard again.
    if not delta and names:
        stream.on_request(request(type_url, [], nonce=responses[-1].nonce), snap)
        assert not stream.types[type_url].wildcard and stream.types[type_url].names == set()


# ii/xds-test-harness: acknack.


@PROTOCOLS
def test_acknack_ack_gets_no_response(delta: bool) -> None:
    async def scenario() -> None:
        registry = StreamRegistry()
        async with xds_channel(cache_with(base()), registry=registry) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(CLUSTER)
            received = await client.receive_acked()
            await client.nothing()
            (stream,) = registry.streams()
            await until(lambda: stream.type_statuses()[0].acked_version == received.version)
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_acknack_nack_is_recorded_and_the_content_not_resent(delta: bool) -> None:
    async def scenario() -> None:
        events: list[object] = []
        cache = cache_with(base())
        callbacks = XdsCallbacks(on_event=lambda s, e: events.append(e))
        async with xds_channel(cache, callbacks=callbacks) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            bad = snapshot(clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b")])
            cache.set_snapshots({ALL_GATEWAYS: bad})
            rejected = await client.receive()
            await client.nack(rejected, "cluster a: bad timeout")
            await until(lambda: any(isinstance(e, Nack) for e in events))
            (nack,) = [e for e in events if isinstance(e, Nack)]
            assert nack.message == "cluster a: bad timeout" and nack.nonce == rejected.nonce
            # Set again (an equal snapshot): nothing is sent, no NACK ping-pong.
            again = snapshot(clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b")])
            cache.set_snapshots({ALL_GATEWAYS: again})
            await client.nothing()
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_acknack_new_content_after_a_nack_is_sent(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(snapshot(clusters=[eds_cluster("a")]))
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a", timeout_s=9)])})
            await client.nack(await client.receive(), "bad")
            fixed = snapshot(clusters=[eds_cluster("a", timeout_s=2)])
            cache.set_snapshots({ALL_GATEWAYS: fixed})
            received = await client.receive_acked()
            assert received.resources == {"a": digest(fixed, CLUSTER, "a")}
            client.cancel()

    run(scenario)


def test_a_nack_does_not_block_lds_cds_names_subscribed_after_it() -> None:
    # gRPC subscribes each new target and cluster by name; after a NACK they must still
    # be answered (here CDS), or its calls wait for the 15 s does-not-exist timer.
    async def scenario() -> None:
        events: list[object] = []
        first = snapshot(clusters=[eds_cluster("a"), eds_cluster("b")])
        cache = cache_with(first)
        callbacks = XdsCallbacks(on_event=lambda s, e: events.append(e))
        async with xds_channel(cache, callbacks=callbacks) as channel:
            client = XdsClient(channel, GRPC_NODE)
            await client.subscribe(CLUSTER, ["a"])
            await client.receive_acked()
            await until(lambda: any(isinstance(e, Ack) for e in events))
            bad = snapshot(clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b")])
            cache.set_snapshots({ALL_GATEWAYS: bad})
            await client.nack(await client.receive(), "cluster a: bad timeout")
            await until(lambda: any(isinstance(e, Nack) for e in events))
            await client.subscribe(CLUSTER, ["b"])
            answer = await client.receive()
            assert answer.resources == {
                "a": digest(bad, CLUSTER, "a"),
                "b": digest(bad, CLUSTER, "b"),
            }
            client.cancel()

    run(scenario)


# ii/xds-test-harness: lds-cds.


@pytest.mark.parametrize("type_url", [CLUSTER, LISTENER], ids=["cds", "lds"])
@PROTOCOLS
def test_lds_cds_wildcard_gets_every_resource(delta: bool, type_url: str) -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            client = XdsClient(channel, NODE, type_url=type_url, delta=delta)
            await client.subscribe(type_url)
            assert (await client.receive()).names == EXPECTED[type_url]
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_lds_cds_update_of_one_resource(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(snapshot(clusters=[eds_cluster("a"), eds_cluster("b")]))
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, type_url=CLUSTER, delta=delta)
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            changed = snapshot(clusters=[eds_cluster("a"), eds_cluster("b", timeout_s=4)])
            cache.set_snapshots({ALL_GATEWAYS: changed})
            received = await client.receive_acked()
            # SotW carries the full state; delta only what changed.
            assert received.names == (["b"] if delta else ["a", "b"])
            # A per-type client gets clusters whose EDS config source is a per-type stream.
            sources = ConfigSources.PER_TYPE_DELTA if delta else ConfigSources.PER_TYPE_SOTW
            served = per_type_snapshot(changed, sources)
            assert received.resources["b"] == digest(served, CLUSTER, "b")
            assert digest(served, CLUSTER, "b") != digest(changed, CLUSTER, "b")
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_lds_cds_removed_resource(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, type_url=LISTENER, delta=delta)
            await client.subscribe(LISTENER)
            await client.receive_acked()
            cache.set_snapshots({ALL_GATEWAYS: snapshot()})
            received = await client.receive_acked()
            assert received.names == []
            assert received.removed == (("http",) if delta else ())
            client.cancel()

    run(scenario)


# ii/xds-test-harness: subscribing.


@PROTOCOLS
def test_subscribing_to_named_resources_gets_only_those(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, type_url=ENDPOINT, delta=delta)
            await client.subscribe(ENDPOINT, ["b"])
            assert (await client.receive_acked()).names == ["b"]
            moved = snapshot(assignments=[endpoints("a", "10.9.9.9"), endpoints("b", "10.0.0.2")])
            cache.set_snapshots({ALL_GATEWAYS: moved})
            await client.nothing()
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_subscribing_to_more_names_gets_the_new_ones(delta: bool) -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(ROUTE, ["routes-http"])
            await client.receive_acked()
            await client.subscribe(ENDPOINT, ["a"])
            assert (await client.receive_acked()).names == ["a"]
            await client.subscribe(ENDPOINT, ["b"])
            assert (await client.receive_acked()).names == ["b"]
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_subscribing_to_a_resource_that_appears_later(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(ENDPOINT, ["later"])
            if delta:
                assert (await client.receive_acked()).removed == ("later",)
            await client.nothing()
            appeared = snapshot(assignments=[endpoints("a", "10.0.0.1"), endpoints("later")])
            cache.set_snapshots({ALL_GATEWAYS: appeared})
            assert (await client.receive_acked()).names == ["later"]
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_resubscribing_resends_an_unchanged_resource(delta: bool) -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(ENDPOINT, ["a", "b"])
            await client.receive_acked()
            await client.unsubscribe(ENDPOINT, ["b"])
            if not delta:
                await client.nothing()
            await client.subscribe(ENDPOINT, ["b"])
            assert (await client.receive_acked()).names == ["b"]
            client.cancel()

    run(scenario)


# ii/xds-test-harness: unsubscribing.


@PROTOCOLS
def test_unsubscribing_one_name_stops_its_updates(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, type_url=ENDPOINT, delta=delta)
            await client.subscribe(ENDPOINT, ["a", "b"])
            await client.receive_acked()
            await client.unsubscribe(ENDPOINT, ["a"])
            await client.nothing()
            moved = snapshot(assignments=[endpoints("a", "10.9.9.9"), endpoints("b", "10.9.9.8")])
            cache.set_snapshots({ALL_GATEWAYS: moved})
            assert (await client.receive_acked()).names == ["b"]
            client.cancel()

    run(scenario)


@PROTOCOLS
def test_unsubscribing_from_everything(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, delta=delta)
            await client.subscribe(ENDPOINT, ["a", "b"])
            await client.receive_acked()
            await client.unsubscribe(ENDPOINT, ["a", "b"])
            await client.nothing()
            moved = snapshot(assignments=[endpoints("a", "10.9.9.9"), endpoints("b", "10.9.9.8")])
            cache.set_snapshots({ALL_GATEWAYS: moved})
            await client.nothing()
            client.cancel()

    run(scenario)


# ii/xds-test-harness: delta.


def test_delta_reconnect_with_initial_resource_versions_resends_nothing() -> None:
    async def scenario() -> None:
        snap = base()
        cache = cache_with(snap)
        async with xds_channel(cache) as channel:
            first = XdsClient(channel, NODE, delta=True)
            await first.subscribe(CLUSTER)
            held = (await first.receive_acked()).resources
            first.cancel()
            # The same client, reconnecting, tells what it holds: nothing to resend.
            again = XdsClient(channel, NODE, delta=True, initial_versions={CLUSTER: held})
            await again.subscribe(CLUSTER)
            received = await again.receive_acked()
            assert (received.names, received.removed) == ([], ())
            grown = snapshot(clusters=[eds_cluster("a"), eds_cluster("b"), eds_cluster("c")])
            cache.set_snapshots({ALL_GATEWAYS: grown})
            assert (await again.receive_acked()).names == ["c"]
            again.cancel()

    run(scenario)


def test_delta_initial_versions_of_unsubscribed_names_bring_nothing() -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            initial = {ENDPOINT: {"a": "stale", "b": "old"}}
            client = XdsClient(channel, NODE, delta=True, initial_versions=initial)
            await client.subscribe(ENDPOINT, ["a"])
            received = await client.receive_acked()
            assert (received.names, received.removed) == (["a"], ())
            await client.nothing()
            client.cancel()

    run(scenario)


def test_delta_updates_carry_only_changed_resources_with_their_versions() -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, NODE, delta=True)
            await client.subscribe(ENDPOINT, ["a", "b"])
            await client.receive_acked()
            moved = snapshot(assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.9")])
            cache.set_snapshots({ALL_GATEWAYS: moved})
            received = await client.receive_acked()
            assert received.resources == {"b": digest(moved, ENDPOINT, "b")}
            client.cancel()

    run(scenario)


def test_every_change_is_pushed_without_waiting_for_the_client() -> None:
    # The client has not ACKed the first push yet: the second still goes out at once.
    async def scenario() -> None:
        cache = cache_with(base())
        events: list[object] = []
        callbacks = XdsCallbacks(on_event=lambda s, e: events.append(e))
        async with xds_channel(cache, callbacks=callbacks) as channel:
            client = XdsClient(channel, NODE)
            await client.subscribe(ENDPOINT, ["a"])
            await client.receive_acked()
            # The ACK must be in before the push, or it answers a superseded response.
            await until(lambda: sum(isinstance(e, Ack) for e in events) == 1)
            for step in (1, 2):
                moved = snapshot(assignments=[endpoints("a", f"10.0.1.{step}")])
                cache.set_snapshots({ALL_GATEWAYS: moved})
                received = await client.receive()
                assert received.version == moved.of_type(ENDPOINT).version
            await client.ack(received)
            await until(lambda: sum(isinstance(e, Ack) for e in events) == 2)
            client.cancel()

    run(scenario)
