"""Per-type clients: the cluster name their EDS and RDS config sources name, and the warning
when a client ACKs clusters or listeners but never opens the EDS or RDS stream they need."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
import pytest
from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.core.v3.base_pb2 import Node
from envoy.config.route.v3.scoped_route_pb2 import ScopedRouteConfiguration

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.snapshot_variants import ConfigSources
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import eds_cluster, endpoints, listener, routes, snapshot
from tests.support.xds_client import XdsClient

NODE = Node(id="envoy-per-type", cluster="edge")
WAIT_S = 0.3


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


def served() -> SnapshotCache:
    cache = SnapshotCache(per_type=PerTypeConfigSources("xds_cluster"))
    cache.set_snapshots(
        {
            ALL_GATEWAYS: snapshot(
                clusters=[eds_cluster("a")],
                assignments=[endpoints("a", "10.0.0.1")],
                listeners=[listener("http", "routes-http")],
                route_configs=[routes("routes-http", "a")],
            )
        }
    )
    return cache


def test_per_type_clients_are_served_config_sources_naming_the_configured_cluster() -> None:
    cache = served()
    for sources in (ConfigSources.PER_TYPE_SOTW, ConfigSources.PER_TYPE_DELTA):
        clusters = cache.snapshot_for(ALL_GATEWAYS, sources).of_type(CLUSTER)
        cluster = Cluster.FromString(clusters.resources["a"].body)
        source = cluster.eds_cluster_config.eds_config.api_config_source
        assert [s.envoy_grpc.cluster_name for s in source.grpc_services] == ["xds_cluster"]
    # ADS clients name no cluster at all.
    ads = Cluster.FromString(cache.snapshot_for(ALL_GATEWAYS).of_type(CLUSTER).resources["a"].body)
    assert ads.eds_cluster_config.eds_config.WhichOneof("config_source_specifier") == "ads"


async def _per_type_client(open_dependents: bool, cache: SnapshotCache | None = None) -> None:
    cache = cache or served()
    registry = StreamRegistry()
    server = await start_xds_server(
        cache, "127.0.0.1:0", registry=registry, dependent_stream_timeout_s=WAIT_S
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{bound_port(server)}")
    clients = []
    try:
        for type_url in (CLUSTER, LISTENER):
            client = XdsClient(channel, NODE, type_url=type_url)
            clients.append(client)
            await client.subscribe(type_url)
            await client.ack(await client.receive())
        if open_dependents:
            eds = XdsClient(channel, NODE, type_url=ENDPOINT)
            clients.append(eds)
            await eds.subscribe(ENDPOINT, ["a"])
            await eds.ack(await eds.receive())
            rds = XdsClient(channel, NODE, type_url=ROUTE)
            clients.append(rds)
            await rds.subscribe(ROUTE, ["routes-http"])
            await rds.ack(await rds.receive())
        await asyncio.sleep(WAIT_S * 3)
    finally:
        for client in clients:
            client.cancel()
        await channel.close()
        await server.stop(None)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_client_that_never_opens_its_eds_and_rds_streams_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="dragoman.xds"):
        run(lambda: _per_type_client(open_dependents=False))
    found = warnings_of(caplog)
    eds = [m for m in found if "per-type EDS stream, but opened none" in m]
    rds = [m for m in found if "per-type RDS stream, but opened none" in m]
    assert len(eds) == 1 and len(rds) == 1, found
    assert "'envoy-per-type'" in eds[0] and "'xds_cluster'" in eds[0]
    assert "--xds-cluster-name" in eds[0]


def test_a_client_that_opens_them_is_not(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dragoman.xds"):
        run(lambda: _per_type_client(open_dependents=True))
    assert not [m for m in warnings_of(caplog) if "opened none" in m]


def test_a_client_of_scoped_listeners_that_never_opens_its_srds_stream_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources("xds_cluster"))
    scoped = snapshot(clusters=[eds_cluster("a")], assignments=[endpoints("a", "10.0.0.1")])
    types = dict(scoped.types)
    types[LISTENER] = TypeSnapshot.of([listener("http", "unused")])
    types[SCOPED_ROUTE] = TypeSnapshot.of(
        [Resource.of("http-80/a.test", ScopedRouteConfiguration(name="http-80/a.test"))]
    )
    cache.set_snapshots({ALL_GATEWAYS: Snapshot(types=types)})
    with caplog.at_level(logging.WARNING, logger="dragoman.xds"):
        run(lambda: _per_type_client(open_dependents=False, cache=cache))
    found = [m for m in warnings_of(caplog) if "opened none" in m]
    assert [m for m in found if "per-type SRDS stream" in m and "scoped routes" in m], found
    assert not [m for m in found if "per-type RDS stream" in m], found


async def _route_change_on_per_type_streams(delta: bool) -> None:
    """The routes move from cluster "a" to the new "c", served to a node's four per-type
    streams: RDS waits until the CDS and EDS streams have "c" warm, and CDS removes "a" only
    once the routes no longer name it."""
    cache = served()
    server = await start_xds_server(cache, "127.0.0.1:0", registry=StreamRegistry())
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{bound_port(server)}")
    names = {CLUSTER: [], ENDPOINT: ["a"], LISTENER: [], ROUTE: ["routes-http"]}
    clients = {t: XdsClient(channel, NODE, type_url=t, delta=delta) for t in names}
    try:
        for type_url, client in clients.items():
            await client.subscribe(type_url, names[type_url])
            await client.ack(await client.receive())
        cds, eds, rds = clients[CLUSTER], clients[ENDPOINT], clients[ROUTE]
        moved = snapshot(
            clusters=[eds_cluster("c")],
            assignments=[endpoints("c", "10.0.0.3")],
            listeners=[listener("http", "routes-http")],
            route_configs=[routes("routes-http", "c")],
        )
        cache.set_snapshots({ALL_GATEWAYS: moved})
        clusters = await cds.receive()
        assert "c" in clusters.names and clusters.removed == ()
        await eds.subscribe(ENDPOINT, ["c"])
        assignment = await eds.receive()
        assert assignment.names == ["c"]
        await cds.ack(clusters)
        await rds.nothing()  # "c" is warming: its CLA is not ACKed yet
        await eds.ack(assignment)
        route = await rds.receive()
        assert route.names == ["routes-http"]
        await clients[LISTENER].nothing()
        await cds.nothing()  # "a" stays while the routes naming it may still run
        await rds.ack(route)
        final = await cds.receive()
        assert (final.names, final.removed) == (([], ("a",)) if delta else (["c"], ()))
    finally:
        for client in clients.values():
            client.cancel()
        await channel.close()
        await server.stop(None)


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_a_node_s_per_type_streams_make_before_break_together(delta: bool) -> None:
    run(lambda: _route_change_on_per_type_streams(delta))
