"""End to end through a real Envoy: HTTPRoute CORS filters (the httproute-cors scenarios).
Preflights are answered by Envoy itself with the route's policy; actual cross-origin
requests reach the backend and come back with the CORS response headers."""

from __future__ import annotations

import http.client
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.harness import (
    DragomanProcess,
    backend_of,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)

ROUTES = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: cors, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {listener}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec: {{selector: {{app: web}}, ports: [{{name: http, port: {port}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, namespace: default, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{{addresses: [127.0.0.2]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: cors, namespace: default}}
spec:
  parentRefs: [{{name: cors}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /cors-1}}}}]
    filters:
    - type: CORS
      cors:
        allowOrigins: ["https://www.foo.com", "https://*.bar.com"]
        allowMethods: [GET, OPTIONS]
        allowHeaders: [x-header-1, x-header-2]
        exposeHeaders: [x-header-3, x-header-4]
        maxAge: 3600
        allowCredentials: true
    backendRefs: [{{name: web, port: {port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /cors-wildcard-origin}}}}]
    filters:
    - type: CORS
      cors: {{allowCredentials: false, allowMethods: [PUT], allowOrigins: ["*"]}}
    backendRefs: [{{name: web, port: {port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /cors-credentials-any-method}}}}]
    filters:
    - type: CORS
      cors: {{allowCredentials: true, allowMethods: ["*"], allowOrigins: ["*"]}}
    backendRefs: [{{name: web, port: {port}}}]
  - matches: [{{path: {{type: PathPrefix, value: /plain}}}}]
    backendRefs: [{{name: web, port: {port}}}]
"""


@dataclass
class World:
    listener: int
    web: EchoBackend
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def request(
        self, method: str, path: str, headers: dict[str, str]
    ) -> tuple[int, dict[str, str]]:
        connection = http.client.HTTPConnection("127.0.0.1", self.listener, timeout=5)
        try:
            connection.request(method, path, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()

    def preflight(self, path: str, origin: str, method: str = "GET", **extra: str):  # type: ignore[no-untyped-def]
        headers = {"Origin": origin, "Access-Control-Request-Method": method, **extra}
        return self.request("OPTIONS", path, headers)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("cors")
    listener = free_port()
    web = EchoBackend("web", host="127.0.0.2", port=free_port("127.0.0.2"))
    web.start()
    dns = DnsResponder().start()
    manifests = root / "manifests"
    manifests.mkdir()
    (manifests / "cors.yaml").write_text(
        textwrap.dedent(ROUTES.format(listener=listener, port=web.port))
    )
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifests, xds, root / "dragoman.log").start()
    envoy = start_envoy(root, xds, dns.port, node_cluster="default/cors")
    w = World(listener, web, dragoman, envoy)
    try:
        try:
            wait_until(lambda: backend_of(f"http://127.0.0.1:{listener}/plain") == "web", 20)
        except TimeoutError:
            pytest.fail("Envoy never routed:\n" + diagnostics(dragoman.log(), envoy))
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        web.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, diagnostics(world.dragoman.log(), world.envoy)


@pytest.mark.parametrize(
    "origin", ["https://www.foo.com", "https://www.bar.com", "https://a.b.bar.com"]
)
def test_preflight_from_an_allowed_origin_is_answered_by_the_gateway(
    world: World, origin: str
) -> None:
    before = world.web.requests
    status, headers = world.preflight(
        "/cors-1", origin, "GET", **{"Access-Control-Request-Headers": "x-header-1"}
    )
    assert status in (200, 204)
    assert headers["access-control-allow-origin"] == origin
    assert headers["access-control-allow-methods"] == "GET, OPTIONS"
    assert headers["access-control-allow-headers"] == "x-header-1, x-header-2"
    assert headers["access-control-max-age"] == "3600"
    assert headers["access-control-allow-credentials"] == "true"
    assert world.web.requests == before  # the backend never saw the preflight


@pytest.mark.parametrize("origin", ["https://foo.com", "http://www.foo.com", "https://bar.com"])
def test_preflight_from_another_origin_is_refused_by_the_gateway(world: World, origin: str) -> None:
    before = world.web.requests
    status, headers = world.preflight("/cors-1", origin)
    # Envoy answers itself, without Access-Control-Allow-Origin: the browser refuses the
    # request; the backend never sees the preflight (it cannot widen the route's policy).
    assert status in (200, 204, 403)
    assert "access-control-allow-origin" not in headers, (status, sorted(headers))
    assert world.web.requests == before


def test_an_actual_request_gets_the_cors_response_headers(world: World) -> None:
    status, headers = world.request("GET", "/cors-1/x", {"Origin": "https://www.foo.com"})
    assert status == 200
    assert headers["access-control-allow-origin"] == "https://www.foo.com"
    assert headers["access-control-expose-headers"] == "x-header-3, x-header-4"
    assert headers["access-control-allow-credentials"] == "true"
    assert world.web.last_request is not None and world.web.last_request["path"] == "/cors-1/x"


def test_wildcard_origin_without_credentials(world: World) -> None:
    status, headers = world.preflight("/cors-wildcard-origin", "https://anyone.example", "PUT")
    assert status in (200, 204)
    assert headers["access-control-allow-origin"] in ("*", "https://anyone.example")
    assert headers["access-control-allow-methods"] == "PUT"
    assert headers["access-control-max-age"] == "5"  # the API's default
    assert "access-control-allow-credentials" not in headers


def test_wildcard_methods_with_credentials_never_answer_a_wildcard(world: World) -> None:
    status, headers = world.preflight("/cors-credentials-any-method", "https://x.example", "PATCH")
    assert status in (200, 204)
    assert headers["access-control-allow-origin"] == "https://x.example"
    methods = headers["access-control-allow-methods"].split(", ")
    assert "*" not in methods and "PATCH" in methods


def test_a_route_without_cors_is_untouched(world: World) -> None:
    status, headers = world.request("GET", "/plain", {"Origin": "https://www.foo.com"})
    assert status == 200
    assert not any(name.startswith("access-control-") for name in headers)
