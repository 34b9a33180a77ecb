"""End to end: `dragoman certgen --renew-before` renews the xDS certificates in place while
dragoman serves a real Envoy over mutual TLS, and nothing restarts.

One directory of certgen's files is what both use: dragoman its `server.crt`, `server.key`
and `ca.crt` (the client CA), Envoy `fleet.crt`, `fleet.key` and `ca.crt` through the file
SDS `dragoman bootstrap --xds-tls-sds-dir` writes. The certificates start as if issued 340
days ago (the CA has 25 days left, the leaves 20), then three runs of the command, as the
CronJob would make them over the weeks, each with the threshold that brings its step today:

1. the CA is replaced and `ca.crt` holds both CAs; the leaves the old CA signed are kept;
2. the leaves are issued again, by the new CA (dragoman and Envoy must trust it by now);
3. the old CA leaves `ca.crt`: a leaf it signed would be refused from then on.

dragoman closes each xDS connection after 2 s (`--xds-max-connection-age`), so Envoy
handshakes again after every step with what it re-read, and so does dragoman. After each
step: Envoy is connected on a connection made after the step, a route added after the step
reaches it, and dragoman's expiry metrics show the files as they are now.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls, xds_tls_secret_files
from dragoman.security.files_store import write_files
from tests.support.builders import (
    backend_ref,
    endpoint_slice,
    gateway,
    http_route,
    match,
    rule,
    service,
    yaml_text,
)
from tests.support.harness import (
    DragomanProcess,
    backend_of,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
    write_manifest,
)

DAYS = 360
ISSUED_DAYS_AGO = 340  # the CA (365 days) has 25 days left, the leaves 20
# The connection age (2 s), gRPC's jitter, the grace (10 s) and Envoy's reconnect backoff:
# generous for a busy machine.
RECONNECT_S = 40
XDS_CLUSTER_CONNECTIONS = "cluster.dragoman-xds.upstream_cx_total"


@dataclass
class World:
    certificates: Path
    manifests: Path
    listener_port: int
    metrics_url: str
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)

    def connections(self) -> int:
        return self.envoy.stat(XDS_CLUSTER_CONNECTIONS, 0)

    def connected(self) -> bool:
        return self.envoy.stats().get("control_plane.connected_state") == 1

    def certgen(self, renew_before: str) -> dict[str, str]:
        """`dragoman certgen` as the CronJob runs it: file name -> written or kept."""
        result = subprocess.run(
            [
                sys.executable, "-m", "dragoman", "certgen",
                "--out", str(self.certificates),
                "--server-name", "localhost",
                "--days", str(DAYS),
                "--renew-before", renew_before,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        actions = {}
        for line in result.stdout.splitlines():
            action, path = line.split()
            actions[Path(path).name] = action
        return actions

    def expiries(self) -> dict[tuple[str, str], float]:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            text = response.read().decode()
        found = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "dragoman_certificate_expiry_timestamp_seconds":
                    found[(sample.labels["kind"], sample.labels["name"])] = sample.value
                elif sample.name == "dragoman_certificate_soonest_expiry_timestamp_seconds":
                    found[("soonest", "")] = sample.value
        return found

    def reconnected_and_routes(self, before: int, path: str) -> None:
        """Envoy is connected on a connection made after `before` was counted, and a route
        to `path` added now reaches it."""
        try:
            wait_until(
                lambda: self.connections() > before and self.connected(), timeout=RECONNECT_S
            )
        except TimeoutError:
            pytest.fail("Envoy did not reconnect after the renewal:\n" + self.diagnostics())
        write_manifest(self.manifests, f"{path.strip('/')}.yaml", route_to(path))
        url = f"http://127.0.0.1:{self.listener_port}{path}"
        try:
            wait_until(lambda: backend_of(url) == "web", timeout=RECONNECT_S)
        except TimeoutError:
            pytest.fail(f"the route to {path} never reached Envoy:\n" + self.diagnostics())
        assert not rejected_updates(self.envoy)


def route_to(path: str) -> str:
    name = path.strip("/")
    rules = [rule(backend_ref("web", 80), matches=[match(path)])]
    return yaml_text(http_route(name, rules=rules, parents=["e2e"]))


def on_disk(path: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(path.read_bytes())


def expiry(certificate: x509.Certificate) -> float:
    return certificate.not_valid_after_utc.timestamp()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    certificates = tmp_path / "certificates"
    issued = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=ISSUED_DAYS_AGO)
    write_files(certificates, server_names=["localhost"], days=DAYS, now=issued)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    web_port = free_port("127.0.0.2")
    listener_port = free_port()
    (manifests / "all.yaml").write_text(
        yaml_text(
            gateway("e2e", listener_port),
            service("web", 80, web_port),
            endpoint_slice("web", web_port, "127.0.0.2"),
        )
    )
    backend = EchoBackend("web", host="127.0.0.2", port=web_port)
    backend.start()
    dns = DnsResponder()
    dns.start()
    xds_address = f"127.0.0.1:{free_port()}"
    metrics_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifests,
        xds_address,
        tmp_path / "dragoman.log",
        (
            "--xds-tls-cert", str(certificates / "server.crt"),
            "--xds-tls-key", str(certificates / "server.key"),
            "--xds-tls-client-ca", str(certificates / "ca.crt"),
            "--xds-max-connection-age", "2s",
            "--metrics-address", metrics_address,
        ),
    )  # fmt: skip
    sds = tmp_path / "sds"
    sds.mkdir()
    tls = XdsClientTls(
        trusted_ca=str(certificates / "ca.crt"),
        certificate=str(certificates / "fleet.crt"),
        private_key=str(certificates / "fleet.key"),
        server_name="localhost",
        sds_directory=str(sds),
    )
    for name, text in xds_tls_secret_files(tls).items():
        (sds / name).write_text(text)
    envoy: EnvoyProcess | None = None
    try:
        dragoman.start()
        envoy = start_envoy(tmp_path, xds_address, dns.port, xds_tls=tls)
        world = World(
            certificates,
            manifests,
            listener_port,
            f"http://{metrics_address}/metrics",
            dragoman,
            envoy,
        )
        world.reconnected_and_routes(-1, "/before")
        yield world
    finally:
        if envoy is not None:
            envoy.stop()
        dragoman.stop()
        dns.stop()
        backend.stop()


def test_a_renewal_reaches_envoy_and_dragoman_without_a_restart(world: World) -> None:
    files = world.certificates
    [first_ca] = on_disk(files / "ca.crt")
    [first_server] = on_disk(files / "server.crt")
    server_name = str(files / "server.crt")
    assert world.expiries()[("xds_server", server_name)] == expiry(first_server)
    assert world.expiries()[("soonest", "")] == expiry(first_server)  # 20 days, not the CA's 25
    dragoman_pid = world.dragoman.process.pid if world.dragoman.process else None

    # 1. The CA is replaced, both trusted; the leaves are kept.
    before = world.connections()
    actions = world.certgen("13d")
    assert actions["ca.crt"] == "written"
    assert actions["server.crt"] == actions["fleet.crt"] == "kept"
    second_ca, kept_ca = on_disk(files / "ca.crt")
    assert kept_ca == first_ca
    world.reconnected_and_routes(before, "/overlap")
    shown = world.expiries()
    cas = {name: value for (kind, name), value in shown.items() if kind == "xds_client_ca"}
    assert cas == {
        first_ca.subject.rfc4514_string(): expiry(first_ca),
        second_ca.subject.rfc4514_string(): expiry(second_ca),
    }
    assert shown[("soonest", "")] == expiry(first_server)

    # 2. The leaves are issued again, by the new CA.
    before = world.connections()
    actions = world.certgen("22d")
    assert actions["server.crt"] == actions["fleet.crt"] == "written"
    assert actions["ca.crt"] == "kept"
    [second_server] = on_disk(files / "server.crt")
    assert second_server.issuer == second_ca.subject
    world.reconnected_and_routes(before, "/renewed")
    shown = world.expiries()
    assert shown[("xds_server", server_name)] == expiry(second_server)
    assert shown[("soonest", "")] == expiry(first_ca)  # still trusted, 25 days left

    # 3. The old CA is dropped: only certificates of the new one get in from now on.
    before = world.connections()
    actions = world.certgen("60d")
    assert actions["ca.crt"] == "written"
    assert actions["server.crt"] == actions["fleet.crt"] == "kept"
    assert on_disk(files / "ca.crt") == [second_ca]
    world.reconnected_and_routes(before, "/dropped")
    shown = world.expiries()
    assert [name for kind, name in shown if kind == "xds_client_ca"] == [
        second_ca.subject.rfc4514_string()
    ]
    assert shown[("soonest", "")] == expiry(second_server)

    # The same dragoman throughout; it re-read its files after each change.
    assert world.dragoman.process is not None and world.dragoman.process.pid == dragoman_pid
    assert world.dragoman.log().count("xDS TLS files changed") >= 3
