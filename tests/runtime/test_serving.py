"""The start both modes share: a controller with its own cache, serving every kind of client
once the first build is in."""

from __future__ import annotations

import asyncio

import grpc
from envoy.config.core.v3.base_pb2 import Node

from dragoman.dag.options import BuildOptions
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.runtime.server_config import NO_DNS_CHECK
from dragoman.runtime.serving import serving_controller, start_serving
from dragoman.snapshots.resources import ALL_GATEWAYS, CLUSTER
from dragoman.store import Store
from dragoman.xds.server.grpc_server import bound_port
from dragoman.xds.server.snapshot_variants import ConfigSources
from tests.support.status_builds import objects
from tests.support.xds_client import XdsClient

MANIFEST = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, port: 8080, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
"""


def test_a_serving_controller_serves_ads_and_per_type_clients_from_its_own_cache() -> None:
    async def scenario() -> None:
        one = serving_controller(BuildOptions(), TranslateOptions())
        other = serving_controller(BuildOptions(), TranslateOptions())
        assert one.cache is not other.cache
        one.update(Store.from_objects(objects(MANIFEST)))
        ads = one.cache.snapshot_for(ALL_GATEWAYS, ConfigSources.ADS)
        assert list(ads.of_type(CLUSTER).resources) == ["default/web/80"]
        variants = set()
        for sources in (ConfigSources.PER_TYPE_SOTW, ConfigSources.PER_TYPE_DELTA):
            per_type = one.cache.snapshot_for(ALL_GATEWAYS, sources)
            assert list(per_type.of_type(CLUSTER).resources) == ["default/web/80"]
            assert per_type.of_type(CLUSTER).version != ads.of_type(CLUSTER).version
            variants.add(per_type.of_type(CLUSTER).version)
        assert len(variants) == 2  # SotW and delta clients name different config sources
        assert not other.cache.ready

    asyncio.run(scenario())


def test_start_serving_answers_ads_and_per_type_clients_on_its_address() -> None:
    async def scenario() -> None:
        controller = serving_controller(BuildOptions(), TranslateOptions())
        controller.update(Store.from_objects(objects(MANIFEST)))
        server, checking = await start_serving(
            controller, "127.0.0.1:0", NO_DNS_CHECK, asyncio.Event()
        )
        assert checking is None  # no DNS check configured
        served = controller.cache.snapshot_for
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{bound_port(server)}") as channel:
                for type_url, delta, sources in (
                    (None, False, ConfigSources.ADS),
                    (CLUSTER, False, ConfigSources.PER_TYPE_SOTW),
                    (CLUSTER, True, ConfigSources.PER_TYPE_DELTA),
                ):
                    client = XdsClient(channel, Node(id="e"), type_url=type_url, delta=delta)
                    await client.subscribe(CLUSTER)
                    received = await asyncio.wait_for(client.receive_acked(), 10)
                    expected = served(ALL_GATEWAYS, sources).of_type(CLUSTER).resources
                    # The very bytes of the variant the cache made for this kind of client.
                    assert received.resources == {n: r.digest for n, r in expected.items()}
                    client.cancel()
        finally:
            await server.stop(grace=None)

    asyncio.run(scenario())
