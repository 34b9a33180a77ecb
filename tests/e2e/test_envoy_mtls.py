"""End to end over mutual TLS, ADS and per-type streams, each state of the world and delta
(certificates over SDS on the ADS stream, or SecretDiscoveryService streams): the real Envoy
connects with
a `gateway/default/a` certificate and serves Gateway a (HTTP, and HTTPS with its certificate
over SDS); strangers fail the handshake; a claim to another Gateway is refused; the server's
files and a listener's Secret rotate while Envoy stays connected, dropping no request and
modifying no listener; and no private key shows in logs, CSDS, `clients` or `render`."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from envoy.config.core.v3.base_pb2 import Node

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls
from dragoman.security.certgen import server_pair
from dragoman.snapshots.resources import LISTENER
from dragoman.xds.csds.csds_client import fetch_client_status
from tests.support.certificates import CertificateAuthority, certificate_authority
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
    write_manifest,
)
from tests.support.mtls import Material, material, stranger, write_pair
from tests.support.xds_client import XdsClient

SHOP = "shop.mtls.test"


def manifests(ports: dict[str, int], backend_port: int, secret_yaml: str, path: str) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: dragoman}}
spec: {{controllerName: dragoman.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: a, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: http, port: {ports["a"]}, protocol: HTTP}}
  - {{name: shop, port: {ports["tls"]}, protocol: HTTPS, hostname: {SHOP},
     tls: {{certificateRefs: [{{name: shop}}]}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: b, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, port: {ports["b"]}, protocol: HTTP}}]
---
apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: default}}
spec: {{type: ExternalName, externalName: echo.mtls.test, ports: [{{port: {backend_port}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: default}}
spec:
  parentRefs: [{{name: a}}, {{name: b}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
    backendRefs: [{{name: echo, port: {backend_port}}}]
---
{secret_yaml}
"""


@dataclass
class World:
    root: Path
    tls: Material
    listener_ca: CertificateAuthority
    ports: dict[str, int]
    backend_port: int
    dragoman: DragomanProcess
    envoy: EnvoyProcess
    delta: bool
    shop_serials: list[int] = field(default_factory=list)

    def write(self, secret_yaml: str, path: str = "/") -> None:
        text = manifests(self.ports, self.backend_port, secret_yaml, path)
        write_manifest(self.dragoman.manifests, "all.yaml", text)

    def https(self, path: str = "/") -> tuple[int, int]:
        """GET over TLS through Envoy: the status and the serial of the certificate served."""
        context = ssl.create_default_context(cadata=self.listener_ca.pem.decode())
        raw = socket.create_connection(("127.0.0.1", self.ports["tls"]), timeout=3)
        with context.wrap_socket(raw, server_hostname=SHOP) as wrapped:
            der = wrapped.getpeercert(binary_form=True)
            assert der is not None
            connection = http.client.HTTPConnection("127.0.0.1", self.ports["tls"], timeout=3)
            connection.sock = wrapped
            connection.request("GET", path, headers={"Host": SHOP})
            response = connection.getresponse()
            response.read()
            return response.status, x509.load_der_x509_certificate(der).serial_number

    def http(self, port: str, path: str = "/") -> int:
        status, _, _ = http_get(f"http://127.0.0.1:{self.ports[port]}{path}", host="any.test")
        return status

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


def _serial(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


TRANSPORTS = [("ads", False), ("ads", True), ("per-type", False), ("per-type", True)]


@pytest.fixture(
    scope="module",
    params=TRANSPORTS,
    ids=["ads-sotw", "ads-delta", "per-type-sotw", "per-type-delta"],
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    transport, delta = request.param
    root = tmp_path_factory.mktemp(f"mtls-{transport}-{'delta' if delta else 'sotw'}")
    (root / "manifests").mkdir()
    tls = material(root / "tls", gateways=("default/a",))
    listener_ca = certificate_authority("listener CA")
    ports = {"a": free_port(), "b": free_port(), "tls": free_port()}
    backend_port = free_port("127.0.0.2")
    backend = EchoBackend("echo", host="127.0.0.2", port=backend_port)
    backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a("echo.mtls.test", "127.0.0.2")
    shop = listener_ca.issue(SHOP)
    xds_address = f"127.0.0.1:{free_port()}"
    server = tls.server_files()
    dragoman = DragomanProcess(
        root / "manifests",
        xds_address,
        root / "dragoman.log",
        extra_args=[
            "--xds-tls-cert", str(server.certificate),
            "--xds-tls-key", str(server.private_key),
            "--xds-tls-client-ca", str(server.trusted_ca),
        ],
    )  # fmt: skip
    client = tls.client_files("gateway-default-a")
    envoy_tls = XdsClientTls(
        trusted_ca=str(client.trusted_ca),
        certificate=str(client.certificate),
        private_key=str(client.private_key),
        server_name="localhost",
    )
    world = World(root, tls, listener_ca, ports, backend_port, dragoman, None, delta)  # type: ignore[arg-type]
    world.shop_serials.append(_serial(shop.certificate))
    world.write(shop.secret_yaml("shop"))
    dragoman.start()
    envoy = start_envoy(
        root,
        xds_address,
        dns.port,
        node_cluster="default/a",
        xds_tls=envoy_tls,
        delta=delta,
        xds_transport=transport,
    )
    world.envoy = envoy
    try:
        try:
            # Generous: the machine running the suite may be busy.
            wait_until(lambda: world.http("a") == 200, timeout=60)
            wait_until(lambda: world.https()[0] == 200, timeout=60)
        except (TimeoutError, OSError):
            pytest.fail("Envoy never served over mutual TLS:\n" + world.diagnostics())
        yield world
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        backend.stop()


def test_traffic_flows_for_its_own_gateway_only(world: World) -> None:
    assert world.http("a") == 200
    status, serial = world.https()
    assert (status, serial) == (200, world.shop_serials[-1])
    # Gateway b's listener is not this Envoy's: nothing listens on its port.
    with pytest.raises(OSError):
        world.http("b")
    assert rejected_updates(world.envoy) == {}, world.diagnostics()
    assert world.envoy.stat("cluster.dragoman-xds.ssl.handshake") >= 1


def _listeners(address: str, credentials: grpc.ChannelCredentials, cluster: str) -> list[str]:
    async def fetch() -> list[str]:
        async with grpc.aio.secure_channel(address, credentials) as channel:
            client = XdsClient(channel, Node(id="probe", cluster=cluster), delta=False)
            await client.subscribe(LISTENER)
            received = await client.receive()
            client.cancel()
            return received.names

    return asyncio.run(asyncio.wait_for(fetch(), 20))


def test_strangers_fail_the_handshake(world: World) -> None:
    address = world.dragoman.xds_address.replace("127.0.0.1", "localhost")
    _, pair = stranger()
    for credentials in (
        grpc.ssl_channel_credentials(world.tls.ca_pem, pair.private_key, pair.certificate),
        grpc.ssl_channel_credentials(world.tls.ca_pem),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            _listeners(address, credentials, "default/a")
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]

    async def plaintext() -> None:
        async with grpc.aio.insecure_channel(world.dragoman.xds_address) as channel:
            client = XdsClient(channel, Node(id="probe", cluster="default/a"))
            await client.subscribe(LISTENER)
            await client.receive()

    with pytest.raises(grpc.RpcError) as caught:
        asyncio.run(asyncio.wait_for(plaintext(), 20))
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    # A raw TLS client without a certificate gets no further than the handshake either.
    context = ssl.create_default_context(cadata=world.tls.ca_pem.decode())
    context.set_alpn_protocols(["h2"])
    host, port = world.dragoman.xds_address.rsplit(":", 1)
    with (
        pytest.raises((ssl.SSLError, OSError)),
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as wrapped,
    ):
        wrapped.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        if not wrapped.recv(1):
            raise OSError("closed")


def test_a_claim_to_another_gateway_is_refused_and_logged(world: World) -> None:
    address = world.dragoman.xds_address.replace("127.0.0.1", "localhost")
    own = world.tls.credentials("gateway-default-a")
    with pytest.raises(grpc.RpcError) as caught:
        _listeners(address, own, "default/b")
    assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    ports = world.ports
    assert _listeners(address, own, "default/a") == [f"http-{ports['a']}", f"https-{ports['tls']}"]
    fleet = world.tls.credentials("fleet")
    assert _listeners(address, fleet, "default/b") == [f"http-{ports['b']}"]
    log = world.dragoman.log()
    assert "spiffe://dragoman.dev/gateway/default/a" in log
    assert "cluster='default/b'" in log


class Asker:
    """Sends HTTPS requests through Envoy, one after another, until stopped: every failure
    is a dropped request."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.failures: list[BaseException] = []
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Asker:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.statuses.append(self.world.https()[0])
            except BaseException as error:
                self.failures.append(error)


def test_server_files_rotate_without_dropping_envoy(world: World) -> None:
    connections = world.envoy.stat("cluster.dragoman-xds.upstream_cx_total")
    fresh = server_pair(world.tls.authority, ["localhost", "127.0.0.1"])
    with Asker(world) as asker:
        write_pair(world.tls.directory, fresh)
        # A new handshake gets the new certificate...
        assert _served_serial(world) == _serial(fresh.certificate)
        time.sleep(0.5)  # requests keep flowing through Envoy meanwhile
    assert asker.failures == [] and set(asker.statuses) == {200}, world.diagnostics()
    assert len(asker.statuses) > 1
    # ...while Envoy's stream stays up (no new connection) and keeps receiving changes.
    world.write(_secret_of(world), path="/moved")
    wait_until(lambda: world.http("a", "/moved") == 200 and world.http("a", "/") == 404, timeout=20)
    world.write(_secret_of(world), path="/")
    wait_until(lambda: world.http("a", "/") == 200, timeout=20)
    assert world.envoy.stat("cluster.dragoman-xds.upstream_cx_total") == connections
    assert "xDS TLS files changed" in world.dragoman.log()


def _served_serial(world: World) -> int:
    """The serial of the certificate dragoman's xDS port presents to a new handshake."""
    context = ssl.create_default_context(cadata=world.tls.ca_pem.decode())
    fleet = world.tls.client_files("fleet")
    context.load_cert_chain(fleet.certificate, fleet.private_key)
    host, port = world.dragoman.xds_address.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as wrapped,
    ):
        der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def _secret_of(world: World) -> str:
    text = (world.dragoman.manifests / "all.yaml").read_text()
    return text[text.index("apiVersion: v1\nkind: Secret") :]


def test_a_rotated_listener_secret_reaches_envoy_alone(world: World) -> None:
    modified = world.envoy.stat("listener_manager.listener_modified")
    lds_version = world.envoy.stats().get("listener_manager.lds.version")
    with Asker(world) as asker:
        renewed = world.listener_ca.issue(SHOP)
        world.shop_serials.append(_serial(renewed.certificate))
        world.write(renewed.secret_yaml("shop"))
        wait_until(lambda: world.https()[1] == world.shop_serials[-1], timeout=20)
    assert asker.failures == [] and set(asker.statuses) == {200}, world.diagnostics()
    assert len(asker.statuses) > 1
    assert world.envoy.stat("listener_manager.listener_modified") == modified
    assert world.envoy.stats().get("listener_manager.lds.version") == lds_version
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_no_private_key_anywhere_printed_or_shown(world: World) -> None:
    admin = world.tls.client_files("admin")
    address = world.dragoman.xds_address.replace("127.0.0.1", "localhost")
    response = fetch_client_status(address, include_contents=True, tls=admin)
    assert response.config, "Envoy is connected"
    assert b"PRIVATE KEY" not in response.SerializeToString()
    for option in ([], ["--resources"]):
        shown = subprocess.run(
            [
                sys.executable, "-m", "dragoman", "clients", "--xds-address", address,
                "--xds-tls-ca", str(admin.trusted_ca), "--xds-tls-cert", str(admin.certificate),
                "--xds-tls-key", str(admin.private_key), *option,
            ],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        assert "e2e-envoy" in shown.stdout
        assert "PRIVATE KEY" not in shown.stdout + shown.stderr
    rendered = subprocess.run(
        [sys.executable, "-m", "dragoman", "render", "--manifests", str(world.dragoman.manifests)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "default/shop" in rendered.stdout
    assert "PRIVATE KEY" not in rendered.stdout + rendered.stderr
    keys = [base64.b64encode(p.private_key).decode() for p in world.tls.pairs.values()]
    for text in (world.dragoman.log(), world.envoy.log_tail(1 << 20), rendered.stdout):
        assert "PRIVATE KEY" not in text
        assert not any(key in text for key in keys)
    # The same through CSDS as the proxy's own (json) view.
    assert "PRIVATE KEY" not in json.dumps(str(response))


def test_clients_without_a_certificate_is_told_what_to_give(world: World) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "dragoman", "clients", "--xds-address",
         world.dragoman.xds_address, "--timeout", "5"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 1
    assert "UNAVAILABLE" in shown.stderr and "the admin certificate" in shown.stderr
