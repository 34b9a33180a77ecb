"""End to end: BackendTLSPolicy options of dragoman's, with a real Envoy and HTTPS backends on
loopback behind ExternalName Services (names from the test DNS responder).

- `dragoman.dev/client-certificate`: the policy's Secret is presented to its Service alone,
  before the Gateway's own clientCertificateRef, which the other Service still gets;
- `dragoman.dev/min-tls-version: TLSv1_3`: a backend that speaks TLS 1.2 at most is refused
  (503, the handshake fails), while the same backend answers a policy allowing TLS 1.2;
- a bad version string refuses the policy (500 for its Service), and Envoy takes every update.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import config_map, yaml_text
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

MTLS, LEGACY = "mtls.options.e2e.test", "legacy.options.e2e.test"
MTLS_IP, LEGACY_IP = "127.0.0.10", "127.0.0.11"
SERVER_CA = certificate_authority("options server CA")
CLIENT_CA = certificate_authority("options client CA")
POLICY_CLIENT = CLIENT_CA.issue("policy.client.e2e.test")
GATEWAY_CLIENT = CLIENT_CA.issue("gateway.client.e2e.test")


def service(name: str, host: str, port: int) -> str:
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec: {{type: ExternalName, externalName: {host}, ports: [{{name: https, port: {port}}}]}}
"""


def policy(name: str, host: str, options: str) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: {name}}}]
  validation:
    hostname: {host}
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: server-ca}}]
  options: {options}
"""


def manifests(listener: int, mtls_port: int, legacy_port: int) -> str:
    ports = {"own": mtls_port, "gateways": mtls_port}
    names = ("own", "gateways", "tls13", "tls12", "typo")
    rules = ", ".join(
        f"{{matches: [{{path: {{type: PathPrefix, value: /{name}}}}}], "
        f"backendRefs: [{{name: {name}, port: {ports.get(name, legacy_port)}}}]}}"
        for name in names
    )
    return "---".join(
        [
            f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {listener}}}]
  tls:
    backend:
      clientCertificateRef: {{name: gateway-client}}
""",
            "\n" + POLICY_CLIENT.secret_yaml("policy-client") + "\n",
            "\n" + GATEWAY_CLIENT.secret_yaml("gateway-client") + "\n",
            "\n" + yaml_text(config_map("server-ca", {"ca.crt": SERVER_CA.pem.decode()})),
            service("own", MTLS, mtls_port),
            service("gateways", MTLS, mtls_port),
            service("tls13", LEGACY, legacy_port),
            service("tls12", LEGACY, legacy_port),
            service("typo", LEGACY, legacy_port),
            policy("own", MTLS, "{dragoman.dev/client-certificate: policy-client}"),
            policy("gateways", MTLS, "{}"),
            policy("tls13", LEGACY, "{dragoman.dev/min-tls-version: TLSv1_3}"),
            policy("tls12", LEGACY, "{dragoman.dev/max-tls-version: TLSv1_2}"),
            policy("typo", LEGACY, "{dragoman.dev/min-tls-version: TLSv1.3}"),
            f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: partners, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{rules}]
""",
        ]
    )


@dataclass
class World:
    url: str
    legacy: HttpsEchoBackend
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def get(self, path: str) -> tuple[int, Any]:
        return get_json(self.url + path)

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("tls-options")
    mtls = HttpsEchoBackend(
        "mtls",
        MTLS_IP,
        SERVER_CA.issue(MTLS),
        root,
        port=free_port(MTLS_IP),
        client_ca=CLIENT_CA.pem,
    ).start()
    legacy = HttpsEchoBackend(
        "legacy",
        LEGACY_IP,
        SERVER_CA.issue(LEGACY),
        root,
        port=free_port(LEGACY_IP),
        maximum_version=ssl.TLSVersion.TLSv1_2,
    ).start()
    dns = DnsResponder().start()
    dns.set_a(MTLS, MTLS_IP)
    dns.set_a(LEGACY, LEGACY_IP)
    listener = free_port()
    directory = root / "manifests"
    directory.mkdir()
    (directory / "options.yaml").write_text(manifests(listener, mtls.port, legacy.port))
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(directory, xds, root / "dragoman.log").start()
    envoy = start_envoy(root, xds, dns.port, node_cluster="default/gw")
    w = World(f"http://127.0.0.1:{listener}", legacy, dragoman, envoy)
    try:
        try:
            wait_until(lambda: w.get("/own")[0] == 200, timeout=20)
            wait_until(lambda: w.get("/tls12")[0] == 200, timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never reached the backends:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        legacy.stop()
        mtls.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_the_policys_certificate_goes_to_its_service_the_gateways_to_the_other(
    world: World,
) -> None:
    answers = [world.get(f"/{name}/x") for _ in range(5) for name in ("own", "gateways")]
    assert [status for status, _ in answers] == [200] * 10, world.diagnostics()
    clients = [data["client"] for _, data in answers]
    assert clients == ["policy.client.e2e.test", "gateway.client.e2e.test"] * 5


def test_a_tls12_only_backend_is_refused_when_the_policy_asks_for_tls13(world: World) -> None:
    before = world.legacy.failed_handshakes
    status, _ = world.get("/tls13/x")
    assert status == 503
    wait_until(lambda: world.legacy.failed_handshakes > before, timeout=5.0, interval=0.02)
    # The same backend, allowed TLS 1.2, answers: the version is what was refused.
    status, data = world.get("/tls12/x")
    assert status == 200, world.diagnostics()
    assert data["sni"] == LEGACY


def test_an_unknown_tls_version_refuses_the_policy(world: World) -> None:
    status, _ = world.get("/typo/x")
    assert status == 500
    log = world.dragoman.log()
    assert "options[dragoman.dev/min-tls-version]" in log and "'TLSv1.3'" in log
