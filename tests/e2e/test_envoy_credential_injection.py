"""End to end through a real Envoy: a CredentialInjector adds the header an external API
(named by DNS, on loopback) asks for. The API answers 401 without it and 200 with it; a rule
whose credential cannot be read answers 500 and never reaches the API; the credential is
rotated over SDS alone; and its value appears nowhere dragoman shows: `render`, `status`,
CSDS, its log (nor in Envoy's config dump)."""

from __future__ import annotations

import http.client
import http.server
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.xds.csds.csds_client import fetch_client_status
from tests.support.harness import (
    LAB_CONFIG,
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
    write_manifest,
)

pytestmark = pytest.mark.timeout(120)

TOKEN = "Bearer e2e-s3cr3t-one"
ROTATED = "Bearer e2e-s3cr3t-two"
CLIENTS_OWN = "Bearer the-clients-own"
ROUNDS = 20

MANIFESTS = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: egress, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {listener}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: partner, namespace: default}}
spec: {{type: ExternalName, externalName: api.partner.test, ports: [{{port: {port}}}]}}
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {{name: partner-key, namespace: default}}
spec: {{secretRef: {{name: partner, key: token}}}}
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {{name: partner-forced, namespace: default}}
spec: {{secretRef: {{name: partner, key: token}}, overwrite: true}}
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {{name: partner-broken, namespace: default}}
spec: {{secretRef: {{name: partner, key: no-such-key}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: partner, namespace: default}}
spec:
  parentRefs: [{{name: egress}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    filters:
    - type: ExtensionRef
      extensionRef: {{group: dragoman.dev, kind: CredentialInjector, name: partner-key}}
    backendRefs: [{{name: partner, port: {port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /forced}}}}]
    filters:
    - type: ExtensionRef
      extensionRef: {{group: dragoman.dev, kind: CredentialInjector, name: partner-forced}}
    backendRefs: [{{name: partner, port: {port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /broken}}}}]
    filters:
    - type: ExtensionRef
      extensionRef: {{group: dragoman.dev, kind: CredentialInjector, name: partner-broken}}
    backendRefs: [{{name: partner, port: {port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /open}}}}]
    backendRefs: [{{name: partner, port: {port}}}]
"""

SECRET = """
apiVersion: v1
kind: Secret
metadata: {{name: partner, namespace: default}}
stringData: {{token: "{token}"}}
"""


@dataclass
class PartnerApi:
    """An API on loopback that answers 200 to the credential it accepts, 401 otherwise, and
    remembers the Authorization header of every request it saw."""

    accepted: str
    seen: list[str | None] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None

    def start(self, host: str, port: int) -> PartnerApi:
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                credential = self.headers.get("Authorization")
                api.seen.append(credential)
                status = 200 if credential == api.accepted else 401
                body = json.dumps({"path": self.path}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@dataclass
class World:
    root: Path
    manifests: Path
    config: Path
    listener: int
    api: PartnerApi
    dragoman: DragomanProcess
    envoy: EnvoyProcess
    xds: str

    def get(self, path: str, headers: dict[str, str] | None = None) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", self.listener, timeout=5)
        try:
            connection.request("GET", path, headers=headers or {})
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def dragoman_command(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "dragoman", *args, "--config", str(self.config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return result.stdout + result.stderr

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("credentials")
    port = free_port("127.0.0.4")
    api = PartnerApi(TOKEN).start("127.0.0.4", port)
    dns = DnsResponder().start()
    dns.set_a("api.partner.test", "127.0.0.4")
    listener = free_port()
    manifests = root / "manifests"
    manifests.mkdir()
    (manifests / "routes.yaml").write_text(
        textwrap.dedent(MANIFESTS.format(listener=listener, port=port))
    )
    (manifests / "secret.yaml").write_text(textwrap.dedent(SECRET.format(token=TOKEN)))
    config = root / "dragoman.yaml"
    # Envoy resolves the partner's name itself (through the test's DNS responder).
    config.write_text(LAB_CONFIG)
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifests, xds, root / "dragoman.log", ["--config", str(config)]
    ).start()
    envoy = start_envoy(root, xds, dns.port, node_cluster="default/egress")
    w = World(root, manifests, config, listener, api, dragoman, envoy, xds)
    try:
        try:
            wait_until(lambda: w.get("/api") == 200, 20)
        except TimeoutError:
            pytest.fail("Envoy never injected the credential:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        api.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_the_api_refuses_a_request_without_the_credential(world: World) -> None:
    before = len(world.api.seen)
    assert world.get("/open") == 401
    assert world.api.seen[before:] == [None]


def test_every_request_of_the_injecting_rule_carries_the_credential(world: World) -> None:
    before = len(world.api.seen)
    statuses = [world.get(f"/api/{index}") for index in range(ROUNDS)]
    assert statuses == [200] * ROUNDS, world.diagnostics()
    # None lost, none sent twice, each with the credential.
    assert world.api.seen[before:] == [TOKEN] * ROUNDS


def test_a_clients_own_value_is_kept_unless_the_injector_overwrites(world: World) -> None:
    before = len(world.api.seen)
    assert world.get("/api", {"Authorization": CLIENTS_OWN}) == 401
    assert world.get("/forced", {"Authorization": CLIENTS_OWN}) == 200
    assert world.api.seen[before:] == [CLIENTS_OWN, TOKEN]


def test_a_credential_that_cannot_be_read_answers_500_and_never_reaches_the_api(
    world: World,
) -> None:
    before = len(world.api.seen)
    statuses = [world.get("/broken") for _ in range(5)]
    assert statuses == [500] * 5
    assert world.api.seen[before:] == []
    out = world.dragoman_command("status", "--manifests", str(world.manifests), "-o", "json")
    items = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(out)["items"]}
    [parent] = items[("HTTPRoute", "partner")]["status"]["parents"]
    resolved = {c["type"]: c for c in parent["conditions"]}["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "InvalidCredentialInjector")
    assert "no-such-key" in resolved["message"]
    broken = {
        c["type"]: c
        for c in items[("CredentialInjector", "partner-broken")]["status"]["conditions"]
    }
    assert (broken["ResolvedRefs"]["status"], broken["ResolvedRefs"]["reason"]) == (
        "False",
        "SecretNotFound",
    )


def test_the_value_appears_nowhere_dragoman_shows(world: World) -> None:
    secret_words = ("e2e-s3cr3t", "s3cr3t")
    shown = {
        "render": world.dragoman_command("render", "--manifests", str(world.manifests)),
        "status": world.dragoman_command("status", "--manifests", str(world.manifests)),
        "log": world.dragoman.log(),
        "csds": str(fetch_client_status(world.xds, include_contents=True)),
        "envoy config dump": json.dumps(world.envoy.config_dump()),
    }
    assert "credential/default/partner-key" in shown["render"]  # the secret is there, by name
    assert "envoy.filters.http.credential_injector" in shown["csds"]  # CSDS shows the filter
    for where, text in shown.items():
        for word in secret_words:
            assert word not in text, f"the credential is shown in {where}"


def test_a_rotated_secret_reaches_envoy_over_sds(world: World) -> None:
    try:
        world.api.accepted = ROTATED
        write_manifest(world.manifests, "secret.yaml", SECRET.format(token=ROTATED))
        try:
            wait_until(lambda: world.get("/api") == 200, 20)
        except TimeoutError:
            pytest.fail("the rotated credential never reached Envoy:\n" + world.diagnostics())
        before = len(world.api.seen)
        assert [world.get("/api") for _ in range(5)] == [200] * 5
        assert world.api.seen[before:] == [ROTATED] * 5
    finally:
        world.api.accepted = TOKEN
        write_manifest(world.manifests, "secret.yaml", SECRET.format(token=TOKEN))
        wait_until(lambda: world.get("/api") == 200, 20)
