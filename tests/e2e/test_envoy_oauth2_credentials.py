"""End to end through a real Envoy: a CredentialInjector with `oauth2` makes Envoy fetch an
access token from a token endpoint (an ExternalName Service named by DNS, on loopback) with
the client credentials grant, and send it as `Authorization: Bearer <token>` to an API that
answers 401 without it. The token endpoint checks the client id and secret (in the form
body, as Envoy sends them); a rule whose token endpoint fails, or cannot be served, never
reaches the API; and neither the client secret nor the token appears anywhere dragoman shows:
`render`, `status`, CSDS, its log (nor in Envoy's config dump)."""

from __future__ import annotations

import http.client
import http.server
import json
import subprocess
import sys
import textwrap
import threading
import urllib.parse
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
)

pytestmark = pytest.mark.timeout(120)

CLIENT_ID = "dragoman-e2e"
CLIENT_SECRET = "e2e-client-s3cr3t"
ACCESS_TOKEN = "e2e-access-t0ken"
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
spec: {{type: ExternalName, externalName: api.partner.test, ports: [{{port: {api_port}}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: idp, namespace: default}}
spec: {{type: ExternalName, externalName: auth.partner.test, ports: [{{port: {idp_port}}}]}}
---
apiVersion: v1
kind: Secret
metadata: {{name: oauth-client, namespace: default}}
stringData: {{secret: "{client_secret}"}}
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {{name: partner-token, namespace: default}}
spec:
  oauth2:
    tokenEndpoint:
      backendRef: {{name: idp, port: {idp_port}}}
      path: /oauth2/token
    clientID: {client_id}
    clientSecretRef: {{name: oauth-client, key: secret}}
    scopes: [orders.read, orders.write]
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {{name: partner-failing, namespace: default}}
spec:
  oauth2:
    tokenEndpoint:
      backendRef: {{name: idp, port: {idp_port}}}
      path: /failing/token
      timeout: 1s
    clientID: {client_id}
    clientSecretRef: {{name: oauth-client, key: secret}}
    tokenFetchRetryInterval: 1s
---
apiVersion: dragoman.dev/v1alpha1
kind: CredentialInjector
metadata: {{name: partner-unserved, namespace: default}}
spec:
  oauth2:
    tokenEndpoint:
      backendRef: {{name: no-such-idp, port: {idp_port}}}
      path: /oauth2/token
    clientID: {client_id}
    clientSecretRef: {{name: oauth-client, key: secret}}
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
      extensionRef: {{group: dragoman.dev, kind: CredentialInjector, name: partner-token}}
    backendRefs: [{{name: partner, port: {api_port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /failing}}}}]
    filters:
    - type: ExtensionRef
      extensionRef: {{group: dragoman.dev, kind: CredentialInjector, name: partner-failing}}
    backendRefs: [{{name: partner, port: {api_port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /unserved}}}}]
    filters:
    - type: ExtensionRef
      extensionRef: {{group: dragoman.dev, kind: CredentialInjector, name: partner-unserved}}
    backendRefs: [{{name: partner, port: {api_port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /open}}}}]
    backendRefs: [{{name: partner, port: {api_port}}}]
"""


@dataclass
class TokenRequest:
    path: str
    authorization: str | None
    form: dict[str, list[str]]


@dataclass
class LoopbackServers:
    """On loopback: the token endpoint (POST /oauth2/token, the client's id and secret in the
    form; /failing/token always answers 503), and the API, which answers 200 to the access
    token alone and 401 otherwise. Both remember what they were sent."""

    token_requests: list[TokenRequest] = field(default_factory=list)
    api_seen: list[str | None] = field(default_factory=list)
    servers: list[http.server.ThreadingHTTPServer] = field(default_factory=list)

    def token_handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        servers = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                request = TokenRequest(self.path, self.headers.get("Authorization"), form)
                servers.token_requests.append(request)
                if self.path == "/failing/token":
                    self._answer(503, {"error": "temporarily_unavailable"})
                elif servers.client_authenticated(request):
                    token = {"access_token": ACCESS_TOKEN, "token_type": "Bearer"}
                    self._answer(200, {**token, "expires_in": 3600})
                else:
                    self._answer(401, {"error": "invalid_client"})

            def _answer(self, status: int, document: dict[str, object]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        return Handler

    def client_authenticated(self, request: TokenRequest) -> bool:
        return request.path == "/oauth2/token" and (
            request.form.get("grant_type") == ["client_credentials"]
            and request.form.get("client_id") == [CLIENT_ID]
            and request.form.get("client_secret") == [CLIENT_SECRET]
        )

    def api_handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        servers = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                credential = self.headers.get("Authorization")
                servers.api_seen.append(credential)
                status = 200 if credential == f"Bearer {ACCESS_TOKEN}" else 401
                body = json.dumps({"path": self.path}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        return Handler

    def start(self, token_port: int, api_port: int) -> LoopbackServers:
        for host, port, handler in (
            ("127.0.0.5", token_port, self.token_handler()),
            ("127.0.0.4", api_port, self.api_handler()),
        ):
            server = http.server.ThreadingHTTPServer((host, port), handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


@dataclass
class World:
    manifests: Path
    config: Path
    listener: int
    loopback: LoopbackServers
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
    root = tmp_path_factory.mktemp("oauth2")
    token_port, api_port = free_port("127.0.0.5"), free_port("127.0.0.4")
    loopback = LoopbackServers().start(token_port, api_port)
    dns = DnsResponder().start()
    dns.set_a("api.partner.test", "127.0.0.4")
    dns.set_a("auth.partner.test", "127.0.0.5")
    listener = free_port()
    manifests = root / "manifests"
    manifests.mkdir()
    (manifests / "routes.yaml").write_text(
        textwrap.dedent(
            MANIFESTS.format(
                listener=listener,
                api_port=api_port,
                idp_port=token_port,
                client_id=CLIENT_ID,
                client_secret=CLIENT_SECRET,
            )
        )
    )
    config = root / "dragoman.yaml"
    config.write_text(LAB_CONFIG)  # Envoy resolves both names through the test's responder
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifests, xds, root / "dragoman.log", ["--config", str(config)]
    ).start()
    envoy = start_envoy(root, xds, dns.port, node_cluster="default/egress")
    w = World(manifests, config, listener, loopback, dragoman, envoy, xds)
    try:
        try:
            wait_until(lambda: w.get("/api") == 200, 30)
        except TimeoutError:
            pytest.fail("Envoy never injected the access token:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        loopback.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_envoy_fetched_the_token_with_the_client_credentials_grant(world: World) -> None:
    asked = [r for r in world.loopback.token_requests if r.path == "/oauth2/token"]
    assert asked, "Envoy never asked the token endpoint"
    assert asked[-1].form["scope"] == ["orders.read orders.write"]
    assert world.loopback.client_authenticated(asked[-1])
    # One token serves every request: it is asked for again only before it expires (an
    # hour), so none of the requests below asks for another.
    before = len(world.loopback.token_requests)
    assert [world.get("/api") for _ in range(5)] == [200] * 5
    assert sum(r.path == "/oauth2/token" for r in world.loopback.token_requests[before:]) == 0


def test_the_api_refuses_a_request_without_the_token(world: World) -> None:
    before = len(world.loopback.api_seen)
    assert world.get("/open") == 401
    assert world.loopback.api_seen[before:] == [None]


def test_every_request_of_the_injecting_rule_carries_the_token(world: World) -> None:
    before = len(world.loopback.api_seen)
    statuses = [world.get(f"/api/{index}") for index in range(ROUNDS)]
    assert statuses == [200] * ROUNDS, world.diagnostics()
    # None lost, none sent twice, each with the token.
    assert world.loopback.api_seen[before:] == [f"Bearer {ACCESS_TOKEN}"] * ROUNDS


def test_a_failing_token_endpoint_keeps_requests_from_the_api(world: World) -> None:
    # Envoy asks again every second (tokenFetchRetryInterval), and is refused every time.
    wait_until(
        lambda: sum(r.path == "/failing/token" for r in world.loopback.token_requests) >= 2, 20
    )
    before = len(world.loopback.api_seen)
    statuses = [world.get("/failing") for _ in range(ROUNDS)]
    assert all(status == 401 for status in statuses), statuses
    assert world.loopback.api_seen[before:] == []  # never sent without the token


def test_a_token_endpoint_that_cannot_be_served_answers_500(world: World) -> None:
    before = len(world.loopback.api_seen)
    assert [world.get("/unserved") for _ in range(5)] == [500] * 5
    assert world.loopback.api_seen[before:] == []
    out = world.dragoman_command("status", "--manifests", str(world.manifests), "-o", "json")
    items = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(out)["items"]}
    [parent] = items[("HTTPRoute", "partner")]["status"]["parents"]
    resolved = {c["type"]: c for c in parent["conditions"]}["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "InvalidCredentialInjector")
    assert "partner-unserved" in resolved["message"]
    unserved = {
        c["type"]: c
        for c in items[("CredentialInjector", "partner-unserved")]["status"]["conditions"]
    }
    assert (unserved["ResolvedRefs"]["status"], unserved["ResolvedRefs"]["reason"]) == (
        "False",
        "BackendNotFound",
    )
    assert unserved["ResolvedRefs"]["message"].startswith("spec.oauth2.tokenEndpoint.backendRef")
    served = {
        c["type"]: c["status"]
        for c in items[("CredentialInjector", "partner-token")]["status"]["conditions"]
    }
    assert served == {"Accepted": "True", "ResolvedRefs": "True"}


def test_neither_the_secret_nor_the_token_appears_where_dragoman_shows(world: World) -> None:
    secret_words = ("s3cr3t", "t0ken")
    shown = {
        "render": world.dragoman_command("render", "--manifests", str(world.manifests)),
        "status": world.dragoman_command("status", "--manifests", str(world.manifests)),
        "log": world.dragoman.log(),
        "csds": str(fetch_client_status(world.xds, include_contents=True)),
        "envoy config dump": json.dumps(world.envoy.config_dump()),
    }
    assert "credential/default/partner-token" in shown["render"]  # by name
    assert "envoy.http.injected_credentials.oauth2" in shown["csds"]
    for where, text in shown.items():
        for word in secret_words:
            assert word not in text, f"a secret is shown in {where}"
