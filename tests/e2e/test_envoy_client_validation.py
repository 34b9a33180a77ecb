"""End to end: a Gateway whose spec.tls.frontend asks its HTTPS listeners for client
certificates, dragoman serving it, and the real Envoy enforcing it.

- the default (AllowValidOnly): a client without a certificate, or with one another CA
  signed, is refused in the handshake; one the configured CA signed gets its answer;
- the other port's perPort configuration (AllowInsecureFallback): every client gets through.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.certificates import Pem, certificate_authority
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)

HOST = "shop.e2e.test"
SERVER_CA = certificate_authority("frontend server CA")
CLIENT_CA = certificate_authority("frontend client CA")
STRANGER_CA = certificate_authority("some other CA")
TRUSTED = CLIENT_CA.issue("trusted.client.e2e.test")
STRANGER = STRANGER_CA.issue("stranger.client.e2e.test")


def indented(pem: bytes, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in pem.decode().splitlines())


def manifests(strict_port: int, fallback_port: int, backend_port: int) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: dragoman}}
spec: {{controllerName: dragoman.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  gatewayClassName: dragoman
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{{group: "", kind: ConfigMap, name: client-ca}}]
      perPort:
      - port: {fallback_port}
        tls:
          validation:
            mode: AllowInsecureFallback
            caCertificateRefs: [{{group: "", kind: ConfigMap, name: client-ca}}]
  listeners:
  - {{name: strict, port: {strict_port}, protocol: HTTPS,
     tls: {{certificateRefs: [{{name: shop}}]}}}}
  - {{name: lenient, port: {fallback_port}, protocol: HTTPS,
     tls: {{certificateRefs: [{{name: shop}}]}}}}
---
{SERVER_CA.issue(HOST).secret_yaml("shop")}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: client-ca, namespace: default}}
data:
  ca.crt: |
{indented(CLIENT_CA.pem, 4)}
---
apiVersion: v1
kind: Service
metadata: {{name: shop, namespace: default}}
spec: {{type: ExternalName, externalName: shop-backend.e2e.test, ports: [{{port: {backend_port}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: shop, namespace: default}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRefs: [{{name: shop, port: {backend_port}}}]}}]
"""


@dataclass
class World:
    strict_port: int
    fallback_port: int
    root: Path
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def get(self, port: int, client: Pem | None) -> int:
        """The status of GET / over TLS to Envoy on `port`, presenting `client` if given."""
        context = ssl.create_default_context(cadata=SERVER_CA.pem.decode())
        if client is not None:
            chain, key = self.root / "client.crt", self.root / "client.key"
            chain.write_bytes(client.certificate)
            key.write_bytes(client.private_key)
            context.load_cert_chain(chain, key)
        raw = socket.create_connection(("127.0.0.1", port), timeout=3)
        with context.wrap_socket(raw, server_hostname=HOST) as tls:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
            connection.sock = tls
            connection.request("GET", "/", headers={"Host": HOST})
            response = connection.getresponse()
            body = response.read()
            if response.status == 200:
                assert json.loads(body)["backend"] == "shop"
            return response.status

    def refused(self, port: int, client: Pem | None) -> bool:
        """Whether the handshake (or, in TLS 1.3, the first read after it) fails."""
        try:
            self.get(port, client)
        except (ssl.SSLError, OSError, http.client.HTTPException):
            return True
        return False

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("frontend")
    directory = root / "manifests"
    directory.mkdir()
    strict_port, fallback_port = free_port(), free_port()
    backend_port = free_port("127.0.0.2")
    (directory / "all.yaml").write_text(manifests(strict_port, fallback_port, backend_port))
    backend = EchoBackend("shop", host="127.0.0.2", port=backend_port)
    backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a("shop-backend.e2e.test", "127.0.0.2")
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(directory, xds_address, root / "dragoman.log").start()
    envoy = start_envoy(root, xds_address, dns.port, node_cluster="default/edge")
    w = World(strict_port, fallback_port, root, dragoman, envoy)
    try:
        try:
            wait_until(lambda: w.get(strict_port, TRUSTED) == 200, timeout=20)
            wait_until(lambda: w.get(fallback_port, None) == 200, timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never served TLS:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_a_client_the_configured_ca_signed_gets_through(world: World) -> None:
    assert world.get(world.strict_port, TRUSTED) == 200


def test_a_client_without_a_certificate_is_refused(world: World) -> None:
    assert world.refused(world.strict_port, None), world.diagnostics()


def test_a_client_another_ca_signed_is_refused(world: World) -> None:
    assert world.refused(world.strict_port, STRANGER), world.diagnostics()


@pytest.mark.parametrize("client", [None, STRANGER, TRUSTED], ids=["none", "stranger", "trusted"])
def test_insecure_fallback_lets_every_client_through(world: World, client: Pem | None) -> None:
    assert world.get(world.fallback_port, client) == 200


def test_status_and_render_say_what_is_enforced(world: World) -> None:
    manifests_dir = str(world.dragoman.manifests)
    status = subprocess.run(
        [sys.executable, "-m", "dragoman", "status", "--manifests", manifests_dir],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [gateway] = [d for d in yaml.safe_load_all(status.stdout) if d["kind"] == "Gateway"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in gateway["status"]["conditions"]}
    assert conditions["InsecureFrontendValidationMode"] == ("True", "ConfigurationChanged")
    rendered = subprocess.run(
        [sys.executable, "-m", "dragoman", "render", "--manifests", manifests_dir],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "require_client_certificate: true" in rendered
    assert "ACCEPT_UNTRUSTED" in rendered
    assert f"client-ca/default/edge/{world.strict_port}" in rendered
    assert "PRIVATE KEY" not in rendered and "PRIVATE KEY" not in world.dragoman.log()
