"""An ADS stream driven the way grpcio drives it: explicit names for every type, LDS and CDS
included, names added as each resource reveals the next; beside an Envoy on the same server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.service.status.v3 import csds_pb2_grpc
from envoy.service.status.v3.csds_pb2 import ClientStatusRequest, ClientStatusResponse

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.xds.csds.csds_client import client_rows
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.proxyless import (
    API,
    ENVOY_NODE,
    GRPC_NODE,
    ROUTES,
    SERVICES,
    WEB,
    grpc_snapshot,
    serving,
    store_of,
)
from tests.support.xds_builders import listener, snapshot
from tests.support.xds_client import Received, XdsClient, xds_endpoint

LATE = "late.default.svc.cluster.local:7000"
LATE_SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: late, namespace: default}
spec: {type: ExternalName, externalName: late.example.com, ports: [{port: 7000}]}
"""


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


async def request(client: XdsClient, type_url: str, *names: str) -> Received:
    """Subscribe to more names of one type, take the answer and ACK it, as grpcio does."""
    await client.subscribe(type_url, names)
    received = await client.receive()
    assert received.type_url == type_url
    await client.ack(received)
    return received


def test_a_grpc_client_walks_from_the_listener_to_the_endpoints() -> None:
    async def scenario() -> None:
        controller, cache = serving(SERVICES, ROUTES)
        served = grpc_snapshot(cache)

        def digests(type_url: str, *names: str) -> dict[str, str]:
            resources = served.of_type(type_url).resources
            return {name: resources[name].digest for name in names}

        registry = StreamRegistry()
        async with xds_endpoint(cache, registry=registry) as (_, channel):
            client = XdsClient(channel, GRPC_NODE)
            # Only what is named comes back, even for LDS and CDS (no wildcard).
            listener = await request(client, LISTENER, WEB)
            assert listener.resources == digests(LISTENER, WEB)
            routes = await request(client, ROUTE, WEB)
            assert routes.resources == digests(ROUTE, WEB)
            clusters = await request(client, CLUSTER, "default/web/50051")
            assert clusters.resources == digests(CLUSTER, "default/web/50051")
            endpoints = await request(client, ENDPOINT, "default/web/50051")
            assert endpoints.resources == digests(ENDPOINT, "default/web/50051")

            # A second target on the same channel: LDS and CDS answer with the full set.
            listeners = await request(client, LISTENER, API)
            assert listeners.resources == digests(LISTENER, WEB, API)
            await request(client, ROUTE, API)
            clusters = await request(client, CLUSTER, "default/api/8000")
            assert set(clusters.resources) == {"default/web/50051", "default/api/8000"}
            # The aggregate names its LOGICAL_DNS child, which the client asks for next.
            child = "default/api/8000/logical-dns"
            clusters = await request(client, CLUSTER, child)
            assert clusters.resources == digests(
                CLUSTER, "default/web/50051", "default/api/8000", child
            )
            await client.nothing()

            # A target that does not exist yet is remembered and pushed once it does.
            await client.subscribe(LISTENER, [LATE])
            answer = await client.receive()
            assert set(answer.resources) == {WEB, API}
            await client.ack(answer)
            controller.update(store_of(SERVICES, ROUTES, LATE_SERVICE))
            pushed = await client.receive()
            assert pushed.type_url == LISTENER
            assert set(pushed.resources) == {WEB, API, LATE}
            await client.ack(pushed)
            await client.nothing()

            [stream] = registry.streams()
            assert stream.group == cache.group_for("", grpc=True)
            client.cancel()

    run(scenario)


def test_envoy_and_grpc_clients_of_one_server_each_get_their_own_clusters() -> None:
    async def scenario() -> None:
        _, cache = serving(SERVICES, ROUTES)
        async with xds_endpoint(cache) as (_, channel):
            envoy = XdsClient(channel, ENVOY_NODE)
            await envoy.subscribe(CLUSTER)  # Envoy's wildcard
            envoy_clusters = await envoy.receive()
            await envoy.ack(envoy_clusters)
            grpc_client = XdsClient(channel, GRPC_NODE)
            grpc_clusters = await request(grpc_client, CLUSTER, "default/api/8000/h2c")

            name = "default/api/8000/h2c"
            envoy_snapshot = cache.snapshot_for("default/gw")
            for_envoy = envoy_snapshot.of_type(CLUSTER).resources[name]
            assert envoy_clusters.resources[name] == for_envoy.digest
            assert cluster_pb2.Cluster.FromString(for_envoy.body).cluster_type.name == (
                "envoy.cluster.dns"
            )
            for_grpc = grpc_snapshot(cache).of_type(CLUSTER).resources[name]
            assert grpc_clusters.resources == {name: for_grpc.digest}
            assert cluster_pb2.Cluster.FromString(for_grpc.body).cluster_type.name == (
                "envoy.clusters.aggregate"
            )
            assert f"{name}/logical-dns" not in envoy_clusters.resources
            envoy.cancel()
            grpc_client.cancel()

    run(scenario)


def test_csds_shows_the_grpc_client_and_what_it_acked() -> None:
    async def scenario() -> None:
        _, cache = serving(SERVICES, ROUTES)
        registry = StreamRegistry()
        async with xds_endpoint(cache, registry=registry) as (_, channel):
            client = XdsClient(channel, GRPC_NODE)
            listeners = await request(client, LISTENER, WEB)
            await request(client, ROUTE, WEB)
            stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(channel)
            response = await _settled(stub)
            [config] = response.config
            assert config.node.user_agent_name == GRPC_NODE.user_agent_name
            rows = {row.type: row for row in client_rows(response)}
            assert set(rows) == {"LDS", "RDS"}
            assert rows["LDS"].node == "grpc-client (checkout) [gRPC]"
            assert rows["LDS"].status == "acked"
            assert rows["LDS"].version == listeners.version
            client.cancel()

    run(scenario)


async def _settled(stub: csds_pb2_grpc.ClientStatusDiscoveryServiceStub) -> ClientStatusResponse:
    response = ClientStatusResponse()
    for _ in range(200):
        response = await stub.FetchClientStatus(ClientStatusRequest(), timeout=5)
        rows = client_rows(response)
        if len(rows) == 2 and all(row.status == "acked" for row in rows):
            return response
        await asyncio.sleep(0.02)
    raise AssertionError(f"CSDS never showed both types acked: {response}")


def test_a_missing_gateway_is_an_empty_variant_and_other_names_all_gateways() -> None:
    _, cache = serving(SERVICES, ROUTES)
    assert cache.group_for("checkout", grpc=True) == cache.group_for("", grpc=True)
    assert cache.group_for("", grpc=True) != ALL_GATEWAYS
    everything = set(grpc_snapshot(cache).of_type(LISTENER).resources)
    missing = set(grpc_snapshot(cache, "no/such-gateway").of_type(LISTENER).resources)
    # No Gateway's route hostnames: only the Service targets, which belong to no Gateway.
    assert everything - missing == {"greeter.example.com:8080", "shop.example.com:8080"}
    assert all(name.split(":")[0].endswith(".svc.cluster.local") for name in missing)


class _Translation:
    """Makes the gRPC clients' snapshot, or fails as a translation bug would."""

    def __init__(self, made: Snapshot | None) -> None:
        self.made = made

    def snapshot(self, group: str) -> Snapshot:
        if self.made is None:
            raise RuntimeError("translation bug")
        return self.made


def test_a_failing_grpc_translation_pushes_no_empty_listener_set() -> None:
    # An empty LDS response would delete every target the client dials.
    async def scenario() -> None:
        target = "svc.default.svc.cluster.local:80"
        good = snapshot(listeners=[listener(target, target)])
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=_Translation(good))
        async with xds_endpoint(cache) as (_, channel):
            client = XdsClient(channel, GRPC_NODE)
            first = await request(client, LISTENER, target)
            assert first.names == [target]
            cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=_Translation(None))
            await client.nothing()
            # The stream still works: the next good translation reaches the client.
            fixed = snapshot(listeners=[listener(target, "renamed-routes")])
            cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=_Translation(fixed))
            pushed = await client.receive()
            assert pushed.resources == {target: fixed.of_type(LISTENER).resources[target].digest}
            client.cancel()

    run(scenario)
