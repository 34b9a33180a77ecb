"""End to end: an HTTPS backend that demands a client certificate (an external API asking
for mutual TLS), reached through an ExternalName and a BackendTLSPolicy, presented the
certificate the Gateway's spec.tls.backend.clientCertificateRef names.

- the Gateway's own Envoys present it: 200, and the backend saw the Gateway's identity;
- the Envoys of another Gateway, which names no certificate, present none: the backend
  refuses the handshake (503); one Gateway's identity is never used for another's routes.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.certificates import certificate_authority
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
)
from tests.support.https_backend import HttpsEchoBackend

HOST = "mtls.e2e.test"
SERVER_CA = certificate_authority("mtls server CA")
CLIENT_CA = certificate_authority("mtls client CA")
CLIENT = CLIENT_CA.issue("gateway.mtls.e2e.test")


def indented(pem: bytes, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in pem.decode().splitlines())


def manifests(mtls_port: int, plain_port: int, backend_port: int) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: mtls, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {mtls_port}}}]
  tls:
    backend:
      clientCertificateRef: {{group: "", kind: Secret, name: gateway-client}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: plain, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {plain_port}}}]
---
{CLIENT.secret_yaml("gateway-client")}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: server-ca, namespace: default}}
data:
  ca.crt: |
{indented(SERVER_CA.pem, 4)}
---
apiVersion: v1
kind: Service
metadata: {{name: partner, namespace: default}}
spec:
  type: ExternalName
  externalName: {HOST}
  ports: [{{name: https, port: {backend_port}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: partner, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: partner}}]
  validation:
    hostname: {HOST}
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: server-ca}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: partner, namespace: default}}
spec:
  parentRefs: [{{name: mtls}}, {{name: plain}}]
  rules: [{{backendRefs: [{{name: partner, port: {backend_port}}}]}}]
"""


@dataclass
class World:
    mtls_url: str
    plain_url: str
    backend: HttpsEchoBackend
    dragoman: DragomanProcess
    mtls_envoy: EnvoyProcess
    plain_envoy: EnvoyProcess

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.mtls_envoy) + diagnostics("", self.plain_envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("mtls")
    backend = HttpsEchoBackend(
        "partner",
        "127.0.0.8",
        SERVER_CA.issue(HOST),
        root,
        port=free_port("127.0.0.8"),
        client_ca=CLIENT_CA.pem,
    ).start()
    dns = DnsResponder().start()
    dns.set_a(HOST, "127.0.0.8")
    mtls_port, plain_port = free_port(), free_port()
    directory = root / "manifests"
    directory.mkdir()
    (directory / "mtls.yaml").write_text(manifests(mtls_port, plain_port, backend.port))
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(directory, xds, root / "dragoman.log").start()
    (root / "mtls").mkdir()
    (root / "plain").mkdir()
    mtls_envoy = start_envoy(root / "mtls", xds, dns.port, node_cluster="default/mtls")
    plain_envoy = start_envoy(root / "plain", xds, dns.port, node_cluster="default/plain")
    w = World(
        f"http://127.0.0.1:{mtls_port}",
        f"http://127.0.0.1:{plain_port}",
        backend,
        dragoman,
        mtls_envoy,
        plain_envoy,
    )
    try:
        try:
            wait_until(lambda: get_json(w.mtls_url + "/")[0] == 200, timeout=20)
            wait_until(lambda: get_json(w.plain_url + "/")[0] == 503, timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never reached the backend:\n" + w.diagnostics())
        yield w
    finally:
        plain_envoy.stop()
        mtls_envoy.stop()
        dragoman.stop()
        dns.stop()
        backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.mtls_envoy) == {}, world.diagnostics()
    assert rejected_updates(world.plain_envoy) == {}, world.diagnostics()


def test_the_backend_demands_a_client_certificate(world: World) -> None:
    # Without one the handshake fails: what makes the next test mean something.
    context = ssl.create_default_context(cadata=SERVER_CA.pem.decode())
    with (
        pytest.raises((ssl.SSLError, OSError)),
        socket.create_connection(("127.0.0.8", world.backend.port), timeout=3) as raw,
        context.wrap_socket(raw, server_hostname=HOST) as conn,
    ):
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        if not conn.recv(1):
            raise ConnectionResetError("closed without an answer")


def test_the_gateway_presents_its_client_certificate(world: World) -> None:
    status, data = get_json(world.mtls_url + "/things")
    assert status == 200, world.diagnostics()
    assert data["client"] == "gateway.mtls.e2e.test"
    assert (data["sni"], data["host"]) == (HOST, HOST)


def test_another_gateways_envoys_present_no_certificate(world: World) -> None:
    before = world.backend.failed_handshakes
    status, _ = get_json(world.plain_url + "/things")
    assert status == 503
    # The backend's connection thread counts the refused handshake: Envoy may answer first.
    wait_until(lambda: world.backend.failed_handshakes > before, timeout=5.0, interval=0.02)
