"""SDS (Secret resources) follows the same protocol rules as the other types: only named
secrets are sent, a rotation pushes the Secret alone, secrets go before listeners in ADS
order, a NACKed Secret is not sent again until it changes (SotW and delta), per-type clients
get listeners pointing at SecretDiscoveryService streams, and the real gRPC per-type
services serve it."""

from __future__ import annotations

import asyncio

from envoy.config.core.v3 import base_pb2
from envoy.config.core.v3.base_pb2 import Node
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2, tls_pb2

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.resources.common_messages import pack
from dragoman.envoy.resources.config_sources import config_source
from dragoman.envoy.translate_options import DEFAULT_OPTIONS, TranslateOptions
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.envoy.translation.translated import Translated
from dragoman.snapshots.resources import LISTENER, SECRET, Resource, Snapshot, TypeSnapshot
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.events import Nack
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.protocol.wire import SotwResponse
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.snapshot_variants import ConfigSources
from tests.support.xds_builders import (
    ack,
    delta_ack,
    delta_nack,
    delta_request,
    nack,
    names_in,
    per_type_snapshot,
    request,
)
from tests.support.xds_client import XdsClient, xds_channel

# A node.cluster naming no Gateway: every Gateway's configuration.
NODE = Node(id="envoy-1", cluster="gateways")


def secret(name: str, generation: int) -> Resource:
    return Resource.of(
        name,
        secret_pb2.Secret(
            name=name,
            tls_certificate=common_pb2.TlsCertificate(
                certificate_chain=base_pb2.DataSource(inline_bytes=f"cert {generation}".encode()),
                private_key=base_pb2.DataSource(inline_bytes=f"key {generation}".encode()),
            ),
        ),
    )


def https_listener(name: str, secrets: list[str]) -> Resource:
    # Translated from its names, as dragoman's listeners are from DAG values: per-type
    # clients get it translated again with their own config source.
    return Translated.made(name, (name, tuple(secrets)), _https_listener, DEFAULT_OPTIONS)


def _https_listener(
    source: tuple[str, tuple[str, ...]], options: TranslateOptions
) -> listener_pb2.Listener:
    name, secrets = source
    context = tls_pb2.DownstreamTlsContext(
        common_tls_context=tls_pb2.CommonTlsContext(
            tls_certificate_sds_secret_configs=[
                secret_pb2.SdsSecretConfig(name=s, sds_config=config_source(options))
                for s in secrets
            ]
        )
    )
    return listener_pb2.Listener(
        name=name,
        filter_chains=[
            listener_components_pb2.FilterChain(
                transport_socket=base_pb2.TransportSocket(
                    name="envoy.transport_sockets.tls", typed_config=pack(context)
                )
            )
        ],
    )


def snap(generations: dict[str, int], listener_port: str = "https") -> Snapshot:
    return Snapshot(
        types={
            SECRET: TypeSnapshot.of(secret(n, g) for n, g in generations.items()),
            LISTENER: TypeSnapshot.of([https_listener(listener_port, sorted(generations))]),
        }
    )


def only(responses: list[SotwResponse]) -> SotwResponse:
    assert len(responses) == 1, [r.type_url for r in responses]
    return responses[0]


def connect(stream: SotwStream, first: Snapshot) -> None:
    lds = only(stream.on_request(request(LISTENER, node=NODE), first))
    sds = only(stream.on_request(request(SECRET, ["default/a"]), first))
    assert names_in(sds) == ["default/a"]  # only what is named, never "b"
    assert stream.on_request(ack(lds), first) == []
    assert stream.on_request(ack(sds, ["default/a"]), first) == []
    stream.take_events()


def test_a_rotation_pushes_the_secret_alone() -> None:
    stream = SotwStream()
    first = snap({"default/a": 1, "default/b": 1})
    connect(stream, first)
    rotated = snap({"default/a": 2, "default/b": 1})
    [pushed] = stream.on_snapshot(rotated)
    assert pushed.type_url == SECRET and names_in(pushed) == ["default/a"]
    # b, which nobody asked for, changing pushes nothing.
    assert stream.on_snapshot(snap({"default/a": 2, "default/b": 2})) == []


def test_secrets_go_before_listeners() -> None:
    stream = SotwStream()
    connect(stream, snap({"default/a": 1}))
    pushed = stream.on_snapshot(snap({"default/a": 2}, listener_port="https-2"))
    assert [r.type_url for r in pushed] == [SECRET, LISTENER]


def test_a_nacked_secret_is_not_sent_again_until_it_changes() -> None:
    stream = SotwStream()
    connect(stream, snap({"default/a": 1}))
    bad = snap({"default/a": 2})
    sent = only(stream.on_snapshot(bad))
    assert stream.on_request(nack(sent, "bad key", ["default/a"]), bad) == []
    [event] = stream.take_events()
    assert isinstance(event, Nack) and event.type_url == SECRET
    # The listener changes; the rejected Secret is not sent again with it.
    unrelated = snap({"default/a": 2}, listener_port="other")
    assert [r.type_url for r in stream.on_snapshot(unrelated)] == [LISTENER]
    fixed = snap({"default/a": 3}, listener_port="other")
    assert names_in(only(stream.on_snapshot(fixed))) == ["default/a"]


def test_delta_sds_rotation_and_nack() -> None:
    stream = DeltaStream()
    first = snap({"default/a": 1, "default/b": 1})
    [sent] = stream.on_request(delta_request(SECRET, ["default/a"], node=NODE), first)
    assert list(sent.names) == ["default/a"]
    assert stream.on_request(delta_ack(sent), first) == []
    rotated = snap({"default/a": 2, "default/b": 1})
    [pushed] = stream.on_snapshot(rotated)
    assert list(pushed.names) == ["default/a"]
    assert stream.on_request(delta_nack(pushed, "bad"), rotated) == []
    assert stream.on_snapshot(snap({"default/a": 2, "default/b": 2})) == []
    [again] = stream.on_snapshot(snap({"default/a": 3, "default/b": 2}))
    assert list(again.names) == ["default/a"]


def test_per_type_clients_fetch_secrets_over_their_own_streams() -> None:
    for sources, api_type in (
        (ConfigSources.PER_TYPE_SOTW, "GRPC"),
        (ConfigSources.PER_TYPE_DELTA, "DELTA_GRPC"),
    ):
        made = per_type_snapshot(snap({"default/a": 1}), sources)
        [resource] = made.of_type(LISTENER).resources.values()
        listener = listener_pb2.Listener.FromString(resource.body)
        context = tls_pb2.DownstreamTlsContext()
        assert listener.filter_chains[0].transport_socket.typed_config.Unpack(context)
        [config] = context.common_tls_context.tls_certificate_sds_secret_configs
        source = config.sds_config
        assert source.WhichOneof("config_source_specifier") == "api_config_source"
        assert source.api_config_source.ApiType.Name(source.api_config_source.api_type) == api_type
        # The Secrets themselves are served as they are.
        assert made.of_type(SECRET).version == snap({"default/a": 1}).of_type(SECRET).version


def test_the_secret_discovery_service_serves_sotw_and_delta() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: snap({"default/a": 1})})

    async def test() -> None:
        async with xds_channel(cache) as channel:
            for delta in (False, True):
                client = XdsClient(channel, NODE, type_url=SECRET, delta=delta)
                await client.subscribe(SECRET, ["default/a"])
                received = await client.receive_acked()
                assert received.names == ["default/a"]
                cache.set_snapshots({ALL_GATEWAYS: snap({"default/a": 2})})
                rotated = await client.receive_acked()
                assert rotated.names == ["default/a"]
                assert rotated.resources != received.resources
                client.cancel()
                cache.set_snapshots({ALL_GATEWAYS: snap({"default/a": 1})})

    asyncio.run(asyncio.wait_for(test(), 30))
