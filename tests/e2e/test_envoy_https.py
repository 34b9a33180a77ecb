"""End to end over TLS: a Gateway with an HTTPS listener per hostname, its certificates in
kubernetes.io/tls Secrets (one in another namespace, allowed by a ReferenceGrant), dragoman
serving it, and the real Envoy terminating TLS with the right certificate for each SNI."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml
from cryptography import x509

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.certificates import CertificateAuthority, certificate_authority
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)

SHOP = "shop.e2e.test"
API = "v1.api.e2e.test"


def manifests(ca: CertificateAuthority, port: int, shop_port: int, api_port: int) -> str:
    shop = ca.issue(SHOP)
    api = ca.issue("*.api.e2e.test")
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: dragoman}}
spec: {{controllerName: dragoman.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: tls, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: shop, port: {port}, protocol: HTTPS, hostname: {SHOP},
     tls: {{certificateRefs: [{{name: shop}}]}}}}
  - {{name: api, port: {port}, protocol: HTTPS, hostname: '*.api.e2e.test',
     tls: {{certificateRefs: [{{name: api, namespace: certs}}]}}}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: gateways, namespace: certs}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: default}}]
  to: [{{group: "", kind: Secret}}]
---
{shop.secret_yaml("shop", "default")}
---
{api.secret_yaml("api", "certs")}
---
apiVersion: v1
kind: Service
metadata: {{name: shop, namespace: default}}
spec: {{type: ExternalName, externalName: shop-backend.e2e.test, ports: [{{port: {shop_port}}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: default}}
spec: {{type: ExternalName, externalName: api-backend.e2e.test, ports: [{{port: {api_port}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: shop, namespace: default}}
spec:
  parentRefs: [{{name: tls, sectionName: shop}}]
  rules: [{{backendRefs: [{{name: shop, port: {shop_port}}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: api, namespace: default}}
spec:
  parentRefs: [{{name: tls, sectionName: api}}]
  hostnames: [{API}]
  rules: [{{backendRefs: [{{name: api, port: {api_port}}}]}}]
"""


@dataclass
class Answer:
    status: int
    body: bytes
    certificate: x509.Certificate

    @property
    def backend(self) -> str:
        return str(json.loads(self.body)["backend"]) if self.status == 200 else ""

    @property
    def names(self) -> list[str]:
        san = self.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        return san.value.get_values_for_type(x509.DNSName)


@dataclass
class World:
    port: int
    ca: CertificateAuthority
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def get(self, sni: str, host: str | None = None, path: str = "/") -> Answer:
        """GET over TLS to Envoy with this SNI, verifying the certificate against the CA."""
        context = ssl.create_default_context(cadata=self.ca.pem.decode())
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=3)
        with context.wrap_socket(raw, server_hostname=sni) as tls:
            der = tls.getpeercert(binary_form=True)
            assert der is not None
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3)
            connection.sock = tls
            connection.request("GET", path, headers={"Host": host or sni})
            response = connection.getresponse()
            return Answer(response.status, response.read(), x509.load_der_x509_certificate(der))

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("https")
    directory = root / "manifests"
    directory.mkdir()
    port = free_port()
    shop_port = free_port("127.0.0.2")
    api_port = free_port("127.0.0.3")
    ca = certificate_authority()
    (directory / "all.yaml").write_text(textwrap.dedent(manifests(ca, port, shop_port, api_port)))
    backends = [
        EchoBackend("shop", host="127.0.0.2", port=shop_port),
        EchoBackend("api", host="127.0.0.3", port=api_port),
    ]
    for backend in backends:
        backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a("shop-backend.e2e.test", "127.0.0.2")
    dns.set_a("api-backend.e2e.test", "127.0.0.3")
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(directory, xds_address, root / "dragoman.log").start()
    envoy = start_envoy(root, xds_address, dns.port, node_cluster="default/tls")
    w = World(port, ca, dragoman, envoy)
    try:
        try:
            wait_until(lambda: w.get(SHOP).backend == "shop", timeout=20)
            wait_until(lambda: w.get(API).backend == "api", timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never served TLS:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends:
            backend.stop()


def test_each_hostname_gets_its_own_certificate(world: World) -> None:
    shop = world.get(SHOP)
    assert (shop.status, shop.backend, shop.names) == (200, "shop", [SHOP])
    api = world.get(API)
    # From the Secret in another namespace, allowed by the ReferenceGrant.
    assert (api.status, api.backend, api.names) == (200, "api", ["*.api.e2e.test"])


def test_a_host_of_another_listener_is_misdirected(world: World) -> None:
    answer = world.get(SHOP, host=API)
    assert answer.names == [SHOP]
    assert answer.status == 421


def test_an_unknown_server_name_is_refused(world: World) -> None:
    # No listener without a hostname: no filter chain matches, and Envoy drops the connection.
    with pytest.raises(OSError):  # a reset, or an SSLError, depending on timing
        world.get("unknown.e2e.test")


def test_envoy_accepted_every_update(world: World) -> None:
    rejected = rejected_updates(world.envoy)
    assert rejected == {}, world.diagnostics()
    assert "PRIVATE KEY" not in world.dragoman.log()


def test_status_of_the_served_gateway(world: World) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "status", "--manifests", str(world.dragoman.manifests)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [gateway] = [d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "Gateway"]
    listeners = {entry["name"]: entry for entry in gateway["status"]["listeners"]}
    assert {name: entry["attachedRoutes"] for name, entry in listeners.items()} == {
        "shop": 1,
        "api": 1,
    }
    for entry in listeners.values():
        assert {c["type"]: c["status"] for c in entry["conditions"]} == {
            "Accepted": "True",
            "Programmed": "True",
            "ResolvedRefs": "True",
            "Conflicted": "False",
        }
