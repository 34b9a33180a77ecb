"""End to end: a real Envoy originates TLS to an HTTPS backend on loopback, named through the
test DNS responder, with a CA made in the test. Every test runs twice: Envoy resolving the
names itself, and with the DNS check on, where Envoy gets the addresses dragoman checked as
EDS endpoints (the name kept as their hostname: SNI, SAN checks and Host are unchanged).

- no policy, `appProtocol: https`: SNI and the verified name are the external name, the CA
  the "system" bundle (dragoman's --config points it at the test CA);
- the same with a name the certificate does not carry: 503, and Envoy counts the SAN failure;
- a BackendTLSPolicy: its hostname as SNI, its CA from a ConfigMap; with subjectAltNames the
  certificate lacks, or a CA that did not sign it: 503;
- the access log line of a failed handshake names the reason, of a completed one the SNI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import (
    backend_tls_policy,
    config_map,
    external_service,
    gateway,
    http_route,
    local_ref,
    yaml_text,
)
from tests.support.certificates import CertificateAuthority, certificate_authority
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
)
from tests.support.https_backend import HttpsEchoBackend

SECURE = "secure.e2e.test"  # a name the backend's certificate carries
# The master-service case: `default/kubernetes` as an ExternalName naming the API server.
API_SERVER = "api.cluster.e2e.test"  # another name the certificate carries
# An ExternalName whose spec.externalIPs name the backend; the DNS responder does not know it.
BY_IPS = "ips.e2e.test"
BACKEND_IP = "127.0.0.7"


def manifests(
    listener: int, port: int, ca: CertificateAuthority, other: CertificateAuthority
) -> str:
    https = partial(external_service, port=port, port_name="https", app_protocol="https")
    plain = partial(external_service, port=port, port_name="https")
    policy = partial(backend_tls_policy, hostname=SECURE, section="https")
    paths = ("secure", "wrong", "pinned", "pinned-san", "untrusted", "kubernetes", "ips")
    return yaml_text(
        gateway("e2e", listener),
        config_map("test-ca", {"ca.crt": ca.pem.decode()}),
        config_map("other-ca", {"ca.crt": other.pem.decode()}),
        https("secure", SECURE),
        https("wrong", "wrongname.e2e.test"),
        plain("pinned", "pinned.e2e.test"),
        plain("pinned-san", "pinned.e2e.test"),
        plain("untrusted", SECURE),
        https("kubernetes", API_SERVER),
        https("ips", BY_IPS, external_ips=[BACKEND_IP]),
        policy("pinned", "pinned", ca_refs=[local_ref("ConfigMap", "test-ca")]),
        policy(
            "pinned-san",
            "pinned-san",
            ca_refs=[local_ref("ConfigMap", "test-ca")],
            subject_alt_names=[{"type": "Hostname", "hostname": "other.e2e.test"}],
        ),
        policy("untrusted", "untrusted", ca_refs=[local_ref("ConfigMap", "other-ca")]),
        http_route("tls", [(f"/{name}", name, port) for name in paths], parents=["e2e"]),
    )


@dataclass
class World:
    checked: bool  # the DNS check on: Envoy gets dragoman's checked addresses over EDS
    url: str
    port: int
    backend: HttpsEchoBackend
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        return get_json(self.url + path, host="gateway.e2e.test")

    def cluster_stat(self, service: str, name: str) -> int:
        # ExternalName clusters are named for the Service port's name, stable across numbers.
        return self.envoy.stat(f"cluster.default/{service}/https.{name}", 0)

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module", params=[False, True], ids=["envoy-resolves", "dns-check"])
def world(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[World]:
    checked: bool = request.param
    root: Path = tmp_path_factory.mktemp("upstream-tls")
    ca, other = certificate_authority("e2e upstream CA"), certificate_authority("unrelated CA")
    backend = HttpsEchoBackend(
        "secure", BACKEND_IP, ca.issue(SECURE, API_SERVER, BY_IPS), root
    ).start()
    listener = free_port()
    manifest_dir = root / "manifests"
    manifest_dir.mkdir()
    (manifest_dir / "all.yaml").write_text(manifests(listener, backend.port, ca, other))
    # The "system" CA bundle is the test CA: what a public CA is to a real deployment.
    bundle = root / "system-ca.pem"
    bundle.write_bytes(ca.pem)
    config = root / "dragoman.yaml"
    dns = DnsResponder().start()
    for name in (SECURE, "wrongname.e2e.test", "pinned.e2e.test", API_SERVER):
        dns.set_a(name, BACKEND_IP)
    check = (
        "externalNames:\n"
        f"  allowedNetworks: [{BACKEND_IP}/32]\n"
        f"  dnsCheck: {{enabled: true, resolvers: ['127.0.0.1:{dns.port}'], minInterval: 1s}}\n"
    )
    config.write_text(f"upstreamTLS: {{systemCABundle: {bundle}}}\n" + (check if checked else ""))
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifest_dir, xds, root / "dragoman.log", ["--config", str(config)]
    ).start()
    envoy = start_envoy(root, xds, dns.port)
    w = World(checked, f"http://127.0.0.1:{listener}", backend.port, backend, dragoman, envoy)
    try:
        try:
            wait_until(lambda: w.get("/secure")[0] == 200, timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never reached the HTTPS backend:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    rejected = rejected_updates(world.envoy)
    assert rejected == {}, world.diagnostics()


def test_tls_with_the_external_name_as_sni_and_the_system_ca(world: World) -> None:
    status, data = world.get("/secure/x")

    assert status == 200, world.diagnostics()
    assert data["backend"] == "secure"
    assert data["sni"] == SECURE
    assert data["host"] == SECURE  # the Host header is rewritten to the external name too


def test_a_certificate_without_the_name_is_refused(world: World) -> None:
    status, _ = world.get("/wrong")

    assert status == 503
    wait_until(lambda: world.cluster_stat("wrong", "ssl.fail_verify_san") > 0, timeout=5)
    assert world.cluster_stat("wrong", "upstream_rq_2xx") == 0


def test_a_policy_names_the_sni_and_brings_its_ca(world: World) -> None:
    status, data = world.get("/pinned")

    assert status == 200, world.diagnostics()
    assert data["sni"] == SECURE  # the policy's hostname, not the external name
    assert data["host"] == "pinned.e2e.test"


def test_a_policy_whose_names_the_certificate_lacks_fails(world: World) -> None:
    status, _ = world.get("/pinned-san")

    assert status == 503
    wait_until(lambda: world.cluster_stat("pinned-san", "ssl.fail_verify_san") > 0, timeout=5)


def test_a_policy_ca_that_did_not_sign_the_certificate_fails(world: World) -> None:
    status, _ = world.get("/untrusted")

    assert status == 503
    wait_until(lambda: world.cluster_stat("untrusted", "ssl.fail_verify_error") > 0, timeout=5)
    assert world.cluster_stat("untrusted", "upstream_rq_2xx") == 0


def test_the_clusters_envoy_runs_carry_the_tls_contexts(world: World) -> None:
    dump = world.envoy.config_dump("dynamic_active_clusters")
    contexts = {}
    for entry in dump["configs"]:
        cluster = entry["cluster"]
        socket = cluster.get("transport_socket")
        if socket is not None:
            contexts[cluster["name"].split("/")[1]] = socket["typed_config"]
    expected = {"secure", "wrong", "pinned", "pinned-san", "untrusted", "kubernetes"}
    # externalIPs on loopback need an allowedNetworks exception, which needs the DNS check.
    assert set(contexts) == expected | ({"ips"} if world.checked else set())
    assert contexts["secure"]["auto_host_sni"] is True
    assert contexts["secure"]["auto_sni_san_validation"] is True
    assert contexts["pinned"]["sni"] == SECURE


def test_the_master_service_reaches_the_api_server_over_verified_tls(world: World) -> None:
    """`default/kubernetes` as an ExternalName naming the API server's DNS name: HTTPS, with
    that name as SNI, as Host, and checked against the certificate."""
    status, data = world.get("/kubernetes/api")

    assert status == 200, world.diagnostics()
    assert (data["sni"], data["host"]) == (API_SERVER, API_SERVER)


def test_with_the_dns_check_envoy_never_resolves_an_external_name(world: World) -> None:
    dump = world.envoy.config_dump("dynamic_active_clusters")
    types = {
        entry["cluster"]["name"].split("/")[1]: entry["cluster"].get("type", "custom")
        for entry in dump["configs"]
    }
    expected = "EDS" if world.checked else "custom"  # the envoy.cluster.dns extension
    assert set(types.values()) == {expected}, types
    if world.checked:
        # The endpoints are the checked address, each carrying the external name.
        dump = json.loads(world.envoy.admin.get("/config_dump", {"include_eds": "true"}))
        [eds] = [c for c in dump["configs"] if c["@type"].endswith("EndpointsConfigDump")]
        hosts = {
            entry["endpoint_config"]["cluster_name"].split("/")[1]: [
                (e["endpoint"]["address"]["socket_address"]["address"], e["endpoint"]["hostname"])
                for locality in entry["endpoint_config"]["endpoints"]
                for e in locality["lb_endpoints"]
            ]
            for entry in eds["dynamic_endpoint_configs"]
        }
        assert hosts["secure"] == [(BACKEND_IP, SECURE)]
        assert hosts["kubernetes"] == [(BACKEND_IP, API_SERVER)]


def test_external_ips_are_used_with_the_external_name_as_sni_and_host(world: World) -> None:
    status, data = world.get("/ips/x")

    if not world.checked:
        # 127.0.0.7 is a loopback address: denied, and reported on the route.
        assert status == 500
        assert "spec.externalIPs: [0] 127.0.0.7 is a loopback address" in world.dragoman.log()
        return
    # Nothing resolves ips.e2e.test: the address came from spec.externalIPs alone.
    assert status == 200, world.diagnostics()
    assert (data["sni"], data["host"]) == (BY_IPS, BY_IPS)


def logged(world: World, path: str) -> dict[str, Any] | None:
    """The last access log line of a request for `path` (Envoy writes them as it goes)."""
    found = None
    for line in Path(world.envoy.log_path).read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"path":"{path}"' in line:
            found = json.loads(line)
    return found


def test_the_access_log_says_why_tls_to_a_backend_failed_and_which_sni_was_sent(
    world: World,
) -> None:
    """A TLS failure is told apart in the access log: the response flags (UF), the attempt
    count, the transport failure reason naming the certificate check, and the endpoint's
    name; a handshake that completed names the SNI sent (a policy's hostname here)."""
    path = f"/wrong/log-{world.checked}"
    assert world.get(path)[0] == 503
    failed = wait_until(partial(logged, world, path), timeout=10)
    assert failed["response_flags"] == "UF"
    assert failed["upstream_request_attempt_count"] == 1
    reason = str(failed["upstream_transport_failure_reason"])
    assert "CERTIFICATE_VERIFY_FAILED" in reason and "SAN" in reason, failed
    assert failed["upstream_host_name"] == "wrongname.e2e.test"
    # Envoy records the SNI with a connection's TLS details: a failed handshake has none.
    assert failed["upstream_server_name"] is None

    path = f"/pinned/log-{world.checked}"
    assert world.get(path)[0] == 200
    served = wait_until(partial(logged, world, path), timeout=10)
    assert served["upstream_server_name"] == SECURE  # the policy's hostname, sent as SNI
    assert served["upstream_host_name"] == "pinned.e2e.test"
    assert served["upstream_transport_failure_reason"] is None
    assert served["upstream_request_attempt_count"] == 1
