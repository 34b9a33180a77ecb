"""End to end: XBackends to HTTPS backends on loopback that demand a client certificate,
their names answered by the test DNS responder and vetted by the DNS check.

- each XBackend reaches its backend with its hostname as SNI and as the name its
  certificate must carry (by default, and through a `validation` block), and presents its
  own client certificate, checked by the backend: two XBackends, two identities;
- an XBackend that presents none is refused by the same backend (the certificate belongs
  to the other XBackend alone);
- `protocol: HTTP11` over TLS offers only `http/1.1` by ALPN: a backend that would pick `h2`
  settles on HTTP/1.1 and answers, where the same backend without it settles on `h2`;
- `localhost` and an IP address as the hostname are refused (500), naming the field, and
  Envoy takes every update.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
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

ONE, TWO = "one.xbackend.e2e.test", "two.xbackend.e2e.test"
ONE_IP, TWO_IP = "127.0.0.8", "127.0.0.9"
# A backend that picks h2 by ALPN when offered (it speaks HTTP/1.1 whatever it picks).
ELEVEN, ELEVEN_IP = "eleven.xbackend.e2e.test", "127.0.0.10"
SERVER_CA = certificate_authority("xbackend server CA")
CLIENT_CA = certificate_authority("xbackend client CA")
ONE_CLIENT = CLIENT_CA.issue("one.client.e2e.test")
TWO_CLIENT = CLIENT_CA.issue("two.client.e2e.test")


def xbackend(name: str, hostname: str, port: int, tls: str, protocol: str = "") -> str:
    spoken = f"\n  protocol: {protocol}" if protocol else ""
    return f"""
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackend
metadata: {{name: {name}, namespace: default}}
spec:
  type: ExternalHostname
  externalHostname: {{hostname: {hostname}}}
  port: {{port: {port}}}
  tls: {tls}{spoken}
"""


def manifests(listener: int, one_port: int, two_port: int, eleven_port: int) -> str:
    presenting = "mode: ClientAndServer, clientCertificateRef: {{name: {}}}"
    validated = (
        f"{{{presenting.format('two-client')}, validation: {{hostname: {TWO}, "
        'caCertificateRefs: [{group: "", kind: ConfigMap, name: server-ca}]}}'
    )
    paths = ("one", "two", "anonymous", "local", "address", "eleven", "negotiated")
    rules = ", ".join(
        f"{{matches: [{{path: {{type: PathPrefix, value: /{path}}}}}], "
        f"backendRefs: [{{group: gateway.networking.x-k8s.io, kind: XBackend, name: {path}}}]}}"
        for path in paths
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
""",
            "\n" + ONE_CLIENT.secret_yaml("one-client") + "\n",
            "\n" + TWO_CLIENT.secret_yaml("two-client") + "\n",
            "\n" + yaml_text(config_map("server-ca", {"ca.crt": SERVER_CA.pem.decode()})),
            # SNI, the name verified and the CAs by default: the hostname, the system bundle.
            xbackend("one", ONE, one_port, "{" + presenting.format("one-client") + "}"),
            xbackend("two", TWO, two_port, validated),
            xbackend("anonymous", ONE, one_port, "{mode: ServerOnly}"),
            xbackend("local", "localhost", one_port, "{mode: ServerOnly}"),
            xbackend("address", "10.20.30.40", one_port, "{mode: ServerOnly}"),
            xbackend("eleven", ELEVEN, eleven_port, "{mode: ServerOnly}", protocol="HTTP11"),
            xbackend("negotiated", ELEVEN, eleven_port, "{mode: ServerOnly}"),
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
    one: HttpsEchoBackend
    eleven: HttpsEchoBackend
    dragoman: DragomanProcess
    envoy: EnvoyProcess
    manifests: Path
    config: Path

    def get(self, path: str) -> tuple[int, Any]:
        return get_json(self.url + path)

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("xbackends")
    one = HttpsEchoBackend(
        "one", ONE_IP, SERVER_CA.issue(ONE), root, port=free_port(ONE_IP), client_ca=CLIENT_CA.pem
    ).start()
    two = HttpsEchoBackend(
        "two", TWO_IP, SERVER_CA.issue(TWO), root, port=free_port(TWO_IP), client_ca=CLIENT_CA.pem
    ).start()
    eleven = HttpsEchoBackend(
        "eleven", ELEVEN_IP, SERVER_CA.issue(ELEVEN), root, port=free_port(ELEVEN_IP),
        alpn=("h2", "http/1.1"),
    ).start()  # fmt: skip
    dns = DnsResponder().start()
    dns.set_a(ONE, ONE_IP)
    dns.set_a(TWO, TWO_IP)
    dns.set_a(ELEVEN, ELEVEN_IP)
    listener = free_port()
    directory = root / "manifests"
    directory.mkdir()
    (directory / "xbackends.yaml").write_text(manifests(listener, one.port, two.port, eleven.port))
    # The "system" CA bundle is the test server CA: what a public CA is to a deployment.
    bundle = root / "system-ca.pem"
    bundle.write_bytes(SERVER_CA.pem)
    config = root / "dragoman.yaml"
    config.write_text(
        f"upstreamTLS: {{systemCABundle: {bundle}}}\n"
        "externalNames:\n"
        f"  allowedNetworks: [{ONE_IP}/32, {TWO_IP}/32, {ELEVEN_IP}/32]\n"
        f"  dnsCheck: {{enabled: true, resolvers: ['127.0.0.1:{dns.port}'], minInterval: 1s}}\n"
    )
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        directory, xds, root / "dragoman.log", ["--config", str(config)]
    ).start()
    envoy = start_envoy(root, xds, dns.port, node_cluster="default/gw")
    w = World(f"http://127.0.0.1:{listener}", one, eleven, dragoman, envoy, directory, config)
    try:
        try:
            wait_until(lambda: w.get("/one")[0] == 200, timeout=20)
            wait_until(lambda: w.get("/two")[0] == 200, timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never reached the XBackends:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        eleven.stop()
        two.stop()
        one.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_each_xbackend_presents_its_own_certificate_with_sni_from_its_hostname(
    world: World,
) -> None:
    answers = {path: world.get(f"/{path}/x") for path in ("one", "two")}
    for path, (status, _) in answers.items():
        assert status == 200, f"/{path}: {world.diagnostics()}"
    seen = {
        path: (data["client"], data["sni"], data["host"]) for path, (_, data) in answers.items()
    }
    assert seen == {
        "one": ("one.client.e2e.test", ONE, ONE),
        "two": ("two.client.e2e.test", TWO, TWO),
    }
    # Every request answered, none lost: ten each, one after the other.
    statuses = [world.get(f"/{path}/n")[0] for _ in range(10) for path in ("one", "two")]
    assert statuses == [200] * 20


def test_an_xbackend_without_a_certificate_is_refused_by_the_backend(world: World) -> None:
    before = world.one.failed_handshakes
    status, _ = world.get("/anonymous/x")
    assert status == 503
    # The backend counts the refused handshake in its connection thread: Envoy may answer first.
    wait_until(lambda: world.one.failed_handshakes > before, timeout=5.0, interval=0.02)


def test_http11_over_tls_offers_only_http11_by_alpn(world: World) -> None:
    answers = [world.get("/eleven/x") for _ in range(5)]
    assert [status for status, _ in answers] == [200] * 5, world.diagnostics()
    assert {data["alpn"] for _, data in answers} == {"http/1.1"}
    # The contrast: the same backend, protocol unset, is offered h2 and picks it (it cannot
    # speak it, so the request fails; what matters is what Envoy offered).
    before = len(world.eleven.alpn)
    status, _ = world.get("/negotiated/x")
    assert status != 200
    wait_until(lambda: len(world.eleven.alpn) > before, timeout=5.0, interval=0.02)
    assert "h2" in world.eleven.alpn[before:]
    assert "h2" not in world.eleven.alpn[:before]


@pytest.mark.parametrize("path", ["local", "address"])
def test_localhost_and_an_address_are_refused(world: World, path: str) -> None:
    status, _ = world.get(f"/{path}/x")
    assert status == 500


def test_the_status_names_the_refused_field(world: World) -> None:
    answer = subprocess.run(
        [
            sys.executable,
            "-m",
            "dragoman",
            "status",
            "--manifests",
            str(world.manifests),
            "--config",
            str(world.config),
            "-o",
            "json",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    statuses = {
        item["metadata"]["name"]: item["status"]
        for item in json.loads(answer.stdout)["items"]
        if item["kind"] == "XBackend"
    }
    for name, words in (("local", "points to localhost"), ("address", "is an IP address")):
        [parent] = statuses[name]["parents"]
        [accepted] = [c for c in parent["conditions"] if c["type"] == "Accepted"]
        assert (accepted["status"], accepted["reason"]) == ("False", "UnsafeHostname")
        assert "spec.externalHostname.hostname" in accepted["message"]
        assert words in accepted["message"]
    [parent] = statuses["one"]["parents"]
    assert {c["type"]: c["status"] for c in parent["conditions"]}["Accepted"] == "True"
