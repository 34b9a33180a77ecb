"""xDS and CSDS over mutual TLS against a real grpcio server: what each identity receives,
handshakes that must fail, and server certificate rotation without dropping streams."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from envoy.config.core.v3 import base_pb2
from envoy.config.core.v3.base_pb2 import Node
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2
from envoy.service.status.v3 import csds_pb2_grpc
from envoy.service.status.v3.csds_pb2 import ClientStatusRequest, ClientStatusResponse

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.security.certgen import client_pair, server_pair
from dragoman.snapshots.resources import LISTENER, SECRET, Resource, Snapshot, TypeSnapshot
from dragoman.xds.protocol.client_kind import GRPC_CLIENT_FEATURE
from dragoman.xds.server.grpc_server import XdsInsecureError, start_xds_server
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.mtls import Material, material, mtls_endpoint, stranger, write_pair
from tests.support.xds_builders import listener, routes, snapshot
from tests.support.xds_client import XdsClient


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


def group(name: str) -> Snapshot:
    return snapshot(
        listeners=[listener(f"listener-of-{name or 'all'}", "r")], route_configs=[routes("r")]
    )


def cache() -> SnapshotCache:
    made = SnapshotCache()
    made.set_snapshots({ALL_GATEWAYS: group(""), "default/a": group("a"), "default/b": group("b")})
    return made


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return material(tmp_path_factory.mktemp("mtls"), gateways=("default/a",), grpc_clients=("g",))


async def listeners_for(
    address: str, credentials: grpc.ChannelCredentials, node: Node
) -> list[str]:
    async with grpc.aio.secure_channel(address, credentials) as channel:
        client = XdsClient(channel, node)
        await client.subscribe(LISTENER)
        received = await client.receive()
        client.cancel()
        return received.names


async def refused(
    address: str, credentials: grpc.ChannelCredentials, node: Node
) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await listeners_for(address, credentials, node)
    return caught.value


def test_a_gateway_identity_receives_its_own_gateway_only(tls: Material) -> None:
    async def test() -> None:
        async with mtls_endpoint(cache(), tls) as (address, _):
            own = tls.credentials("gateway-default-a")
            assert await listeners_for(address, own, Node(id="e", cluster="default/a")) == [
                "listener-of-a"
            ]
            for claim in ("default/b", "", "default/a/../b"):
                error = await refused(address, own, Node(id="e", cluster=claim))
                assert error.code() is grpc.StatusCode.PERMISSION_DENIED
                assert "spiffe://dragoman.dev/gateway/default/a" in (error.details() or "")

    run(test)


def test_a_gateway_identity_whose_gateway_does_not_exist_yet_gets_nothing(
    tmp_path: Path,
) -> None:
    """Not the all-gateways group, as a node naming an unknown group would otherwise get."""
    tls = material(tmp_path, gateways=("default/new",))

    async def test() -> None:
        async with mtls_endpoint(cache(), tls) as (address, _):
            names = await listeners_for(
                address, tls.credentials("gateway-default-new"), Node(id="e", cluster="default/new")
            )
            assert names == []

    run(test)


def test_fleet_receives_whatever_group_it_names(tls: Material) -> None:
    async def test() -> None:
        async with mtls_endpoint(cache(), tls) as (address, _):
            fleet = tls.credentials("fleet")
            assert await listeners_for(address, fleet, Node(id="e", cluster="default/b")) == [
                "listener-of-b"
            ]
            assert await listeners_for(address, fleet, Node(id="e", cluster="")) == [
                "listener-of-all"
            ]

    run(test)


def test_grpc_identities_receive_proxyless_variants_only(tls: Material) -> None:
    async def test() -> None:
        async with mtls_endpoint(cache(), tls) as (address, _):
            credentials = tls.credentials("grpc-g")
            envoy = Node(id="e", cluster="default/a")
            error = await refused(address, credentials, envoy)
            assert error.code() is grpc.StatusCode.PERMISSION_DENIED
            proxyless = Node(id="g", cluster="default/a", client_features=[GRPC_CLIENT_FEATURE])
            async with grpc.aio.secure_channel(address, credentials) as channel:
                client = XdsClient(channel, proxyless)
                await client.subscribe(LISTENER, ["listener-of-a"])
                received = await client.receive()
                client.cancel()
            assert received.type_url == LISTENER

    run(test)


def test_admin_may_use_csds_and_nobody_else(tls: Material) -> None:
    async def fetch(address: str, credentials: grpc.ChannelCredentials) -> ClientStatusResponse:
        async with grpc.aio.secure_channel(address, credentials) as channel:
            stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(channel)
            response: ClientStatusResponse = await stub.FetchClientStatus(
                ClientStatusRequest(), timeout=5
            )
            return response

    async def test() -> None:
        async with mtls_endpoint(cache(), tls) as (address, _):
            assert list((await fetch(address, tls.credentials("admin"))).config) == []
            for name in ("fleet", "gateway-default-a", "grpc-g"):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await fetch(address, tls.credentials(name))
                assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED
            # And admin receives no configuration.
            error = await refused(address, tls.credentials("admin"), Node(id="e", cluster=""))
            assert error.code() is grpc.StatusCode.PERMISSION_DENIED

    run(test)


def test_csds_never_shows_a_secret_body(tls: Material) -> None:
    key = b"-----BEGIN PRIVATE KEY-----\nMIG...\n-----END PRIVATE KEY-----\n"
    secret = Resource.of(
        "default/shop",
        secret_pb2.Secret(
            name="default/shop",
            tls_certificate=common_pb2.TlsCertificate(
                private_key=base_pb2.DataSource(inline_bytes=key)
            ),
        ),
    )
    served = Snapshot(types={**group("a").types, SECRET: TypeSnapshot.of([secret])})
    made = SnapshotCache()
    made.set_snapshots({ALL_GATEWAYS: served})
    registry = StreamRegistry()

    async def test() -> None:
        async with mtls_endpoint(made, tls, registry=registry) as (address, _):
            async with grpc.aio.secure_channel(address, tls.credentials("fleet")) as channel:
                client = XdsClient(channel, Node(id="e", cluster=""))
                await client.subscribe(SECRET, ["default/shop"])
                received = await client.receive_acked()
                assert received.names == ["default/shop"]
                async with grpc.aio.secure_channel(address, tls.credentials("admin")) as admin:
                    stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(admin)
                    for _ in range(200):  # until the server has taken the ACK
                        response = await stub.FetchClientStatus(ClientStatusRequest(), timeout=5)
                        if "ACKED" in str(response):
                            break
                        await asyncio.sleep(0.01)
                client.cancel()
            [config] = response.config
            [entry] = [e for e in config.generic_xds_configs if e.type_url == SECRET]
            assert entry.name == "default/shop" and entry.version_info
            assert not entry.HasField("xds_config")
            assert b"PRIVATE KEY" not in response.SerializeToString()

    run(test)


def test_handshakes_without_a_certificate_of_the_ca_fail(tls: Material) -> None:
    async def test() -> None:
        async with mtls_endpoint(cache(), tls) as (address, _):
            node = Node(id="e", cluster="")
            other_ca, pair = stranger()
            for credentials in (
                # No client certificate at all.
                grpc.ssl_channel_credentials(tls.ca_pem),
                # A certificate from another CA, naming the fleet identity.
                grpc.ssl_channel_credentials(tls.ca_pem, pair.private_key, pair.certificate),
            ):
                error = await refused(address, credentials, node)
                assert error.code() is grpc.StatusCode.UNAVAILABLE
            async with grpc.aio.insecure_channel(address) as channel:
                client = XdsClient(channel, node)
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await client.subscribe(LISTENER)
                    await client.receive()
                assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
            assert other_ca != tls.ca_pem

    run(test)


def test_a_certificate_naming_no_identity_is_refused(tls: Material, tmp_path: Path) -> None:
    odd = client_pair(tls.authority, "odd", "spiffe://example.com/fleet")

    async def test() -> None:
        async with mtls_endpoint(cache(), tls) as (address, _):
            credentials = grpc.ssl_channel_credentials(tls.ca_pem, odd.private_key, odd.certificate)
            error = await refused(address, credentials, Node(id="e", cluster=""))
            assert error.code() is grpc.StatusCode.PERMISSION_DENIED

    run(test)


def test_plaintext_elsewhere_than_loopback_needs_insecure() -> None:
    async def test() -> None:
        with pytest.raises(XdsInsecureError, match="--xds-insecure"):
            await start_xds_server(cache(), "0.0.0.0:0")
        server = await start_xds_server(cache(), "0.0.0.0:0", insecure=True)
        await server.stop(None)

    run(test)


def _served_certificate(port: int, tls: Material) -> x509.Certificate:
    context = ssl.create_default_context(cadata=tls.ca_pem.decode())
    fleet = tls.client_files("fleet")
    context.load_cert_chain(fleet.certificate, fleet.private_key)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as wrapped,
    ):
        der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_rotated_server_files_serve_new_handshakes_and_keep_streams(tmp_path: Path) -> None:
    tls = material(tmp_path)
    made = cache()

    async def test() -> None:
        async with mtls_endpoint(made, tls) as (address, credentials):
            port = int(address.rsplit(":", 1)[1])
            before = await asyncio.to_thread(_served_certificate, port, tls)
            async with grpc.aio.secure_channel(address, tls.credentials("fleet")) as channel:
                client = XdsClient(channel, Node(id="e", cluster="default/b"))
                await client.subscribe(LISTENER)
                first = await client.receive_acked()
                assert first.names == ["listener-of-b"]

                # A half-done rotation (a new certificate, the old key) is not taken...
                fresh = server_pair(tls.authority, ["localhost", "127.0.0.1"])
                (tmp_path / "server.crt").write_bytes(fresh.certificate)
                unchanged = await asyncio.to_thread(_served_certificate, port, tls)
                assert unchanged.serial_number == before.serial_number
                # ...the finished one is, by the next handshake.
                write_pair(tmp_path, fresh)
                after = await asyncio.to_thread(_served_certificate, port, tls)
                assert after.serial_number != before.serial_number
                assert (
                    after.serial_number
                    == x509.load_pem_x509_certificate(fresh.certificate).serial_number
                )
                assert credentials.rotations == 1

                # The stream opened before the rotation still receives updates.
                made.set_snapshot("default/b", group("b-changed"))
                update = await client.receive()
                assert update.names == ["listener-of-b-changed"]
                client.cancel()

    run(test)
