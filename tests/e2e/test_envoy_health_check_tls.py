"""End to end: a BackendPolicy's active HTTP health check on an ExternalName reached over TLS
sends the external name as Host and as SNI, never an address: when Envoy resolves the name,
and when the DNS check pins the addresses it served (Envoy Gateway issue #7798). No traffic
is sent: a host nobody uses is checked at the policy's interval."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import backend_policy, external_service, gateway, http_route, yaml_text
from tests.support.certificates import certificate_authority
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)
from tests.support.https_backend import HttpsEchoBackend

pytestmark = pytest.mark.timeout(120)

PARTNER = "checked.e2e.test"
BACKEND_IP = "127.0.0.9"


@dataclass
class World:
    backend: HttpsEchoBackend
    dragoman: DragomanProcess
    envoy: EnvoyProcess


@pytest.fixture(scope="module", params=[False, True], ids=["envoy-resolves", "dns-check"])
def world(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[World]:
    root: Path = tmp_path_factory.mktemp("health-check-tls")
    ca = certificate_authority("e2e health check CA")
    backend = HttpsEchoBackend("partner", BACKEND_IP, ca.issue(PARTNER), root).start()
    dns = DnsResponder().start()
    dragoman = envoy = None
    try:
        dns.set_a(PARTNER, BACKEND_IP)
        manifests = root / "manifests"
        manifests.mkdir()
        (manifests / "all.yaml").write_text(
            yaml_text(
                gateway("e2e", free_port()),
                external_service(
                    "partner", PARTNER, backend.port, port_name="https", app_protocol="https"
                ),
                backend_policy(
                    "partner-health",
                    "partner",
                    spec={
                        "healthCheck": {
                            "active": {
                                "type": "HTTP",
                                "interval": "500ms",
                                "http": {"path": "/healthz"},
                            }
                        }
                    },
                ),
                http_route("partner", [("/", "partner", backend.port)], parents=["e2e"]),
            )
        )
        bundle = root / "system-ca.pem"
        bundle.write_bytes(ca.pem)
        check = (
            "externalNames:\n"
            f"  allowedNetworks: [{BACKEND_IP}/32]\n"
            f"  dnsCheck: {{enabled: true, resolvers: ['127.0.0.1:{dns.port}'], minInterval: 1s}}\n"
        )
        config = root / "dragoman.yaml"
        config.write_text(
            f"upstreamTLS: {{systemCABundle: {bundle}}}\n" + (check if request.param else "")
        )
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(
            manifests, xds, root / "dragoman.log", ["--config", str(config)]
        ).start()
        envoy = start_envoy(root, xds, dns.port)
        yield World(backend, dragoman, envoy)
        assert not rejected_updates(envoy), diagnostics(dragoman.log(), envoy)
    finally:
        if envoy is not None:
            envoy.stop()
        if dragoman is not None:
            dragoman.stop()
        dns.stop()
        backend.stop()


def test_checks_send_the_external_name_as_host_and_sni(world: World) -> None:
    def checks() -> list[tuple[str, str, str | None]] | None:
        found = [seen for seen in world.backend.requests if seen[0] == "/healthz"]
        return found if len(found) >= 2 else None

    try:
        found = wait_until(checks, timeout=30)
    except TimeoutError:
        pytest.fail(
            "no health check reached the backend:\n"
            + diagnostics(world.dragoman.log(), world.envoy)
        )
    assert {(host, sni) for _, host, sni in found} == {(PARTNER, PARTNER)}
    assert world.backend.failed_handshakes == 0
