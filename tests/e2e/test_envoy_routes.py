"""End to end: Gateway API route features through a real Envoy fed by `dragoman serve`.

Header, query and method matches; redirects and rewrites as the spec says; header
modifiers; mirrors reaching their backends (an ExternalName one with its own Host);
timeouts against a slow backend; wildcard and exact route hostnames together; and a
GRPCRoute to a grpcio health service over h2c, called through Envoy with a grpcio client.
"""

from __future__ import annotations

import http.client
import json
import textwrap
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.builders import Object, endpoint_slice, external_service, service, yaml_text
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)
from tests.support.websocket import WebSocketEchoBackend, websocket_echo

EXTERNAL_HOST = "mirror.e2e.test"


def manifests(listener_port: int, grpc_listener_port: int, ports: dict[str, int]) -> dict[str, str]:
    def pods(name: str, address: str, port: int, app_protocol: str = "") -> list[Object]:
        """A Service on port 80 and its one pod, at `address`:`port`."""
        return [
            service(name, 80, port, port_name="main", app_protocol=app_protocol),
            endpoint_slice(name, {"main": port}, address),
        ]

    return {
        "gateway.yaml": f"""
            apiVersion: gateway.networking.k8s.io/v1
            kind: Gateway
            metadata: {{name: e2e, namespace: default}}
            spec:
              gatewayClassName: dragoman
              listeners:
                - {{name: http, protocol: HTTP, port: {listener_port}}}
                # GRPCRoutes alone: on the HTTPRoutes' listener they would share hostnames.
                - name: grpc
                  protocol: HTTP
                  port: {grpc_listener_port}
                  allowedRoutes: {{kinds: [{{kind: GRPCRoute}}]}}
            ---
            # Takes the same port first: Envoys serving every Gateway get its listener, and
            # this test's Envoy (node.cluster default/e2e) still gets e2e's, with its clusters.
            apiVersion: gateway.networking.k8s.io/v1
            kind: Gateway
            metadata: {{name: a-first, namespace: default}}
            spec:
              gatewayClassName: dragoman
              listeners:
                - {{name: http, protocol: HTTP, port: {listener_port}}}
            """,
        "services.yaml": yaml_text(
            *pods("web", "127.0.0.2", ports["web"]),
            *pods("alt", "127.0.0.3", ports["alt"]),
            *pods("health", "127.0.0.5", ports["grpc"]),
            *pods("ws", "127.0.0.6", ports["ws"], "kubernetes.io/ws"),
            external_service("external", EXTERNAL_HOST, ports["external"]),
        ),
        "routes.yaml": """
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {name: features, namespace: default}
            spec:
              parentRefs: [{name: e2e}]
              rules:
              - matches:
                - path: {value: /match}
                  headers: [{name: Version, value: two}]
                - path: {value: /match}
                  queryParams: [{name: animal, value: whale}]
                - path: {value: /match}
                  method: DELETE
                - path: {type: RegularExpression, value: '/match/v[0-9]+'}
                backendRefs: [{name: alt, port: 80}]
              - matches: [{path: {value: /match}}]
                backendRefs: [{name: web, port: 80}]
              - matches: [{path: {value: /redirect-prefix}}]
                filters:
                - type: RequestRedirect
                  requestRedirect:
                    statusCode: 301
                    path: {type: ReplacePrefixMatch, replacePrefixMatch: /moved}
              - matches: [{path: {value: /redirect-full}}]
                filters:
                - type: RequestRedirect
                  requestRedirect:
                    hostname: example.org
                    path: {type: ReplaceFullPath, replaceFullPath: /elsewhere}
              - matches: [{path: {value: /redirect-https}}]
                filters:
                - type: RequestRedirect
                  requestRedirect: {scheme: https, hostname: secure.example.org, statusCode: 308}
              - matches: [{path: {value: /redirect-port}}]
                filters:
                - type: RequestRedirect
                  requestRedirect: {port: 8083, statusCode: 307}
              - matches: [{path: {value: /redirect-scheme}}]
                filters:
                - type: RequestRedirect
                  requestRedirect: {scheme: https}
              - matches: [{path: {value: /websocket}}]
                backendRefs: [{name: ws, port: 80}]
              - matches: [{path: {value: /prefix/one}}]
                filters:
                - type: URLRewrite
                  urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /one}}
                backendRefs: [{name: web, port: 80}]
              - matches: [{path: {value: /strip}}]
                filters:
                - type: URLRewrite
                  urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}
                backendRefs: [{name: web, port: 80}]
              - matches: [{path: {value: /full}}]
                filters:
                - type: URLRewrite
                  urlRewrite:
                    hostname: rewritten.example
                    path: {type: ReplaceFullPath, replaceFullPath: /replaced}
                backendRefs: [{name: web, port: 80}]
              - matches: [{path: {value: /headers}}]
                filters:
                - type: RequestHeaderModifier
                  requestHeaderModifier:
                    set: [{name: X-Set, value: set-value}]
                    add: [{name: X-Add, value: added}]
                    remove: [X-Remove]
                - type: ResponseHeaderModifier
                  responseHeaderModifier:
                    set: [{name: X-Served-By, value: dragoman}]
                    remove: [X-Backend]
                backendRefs:
                - name: web
                  port: 80
                  filters:
                  - type: RequestHeaderModifier
                    requestHeaderModifier: {set: [{name: X-Chosen, value: web}]}
              - matches: [{path: {value: /mirror}}]
                filters:
                - type: RequestMirror
                  requestMirror: {backendRef: {name: alt, port: 80}}
                - type: RequestMirror
                  requestMirror: {backendRef: {name: external, port: EXTERNAL_PORT}}
                backendRefs: [{name: web, port: 80}]
              - matches: [{path: {value: /slow}}]
                timeouts: {request: 500ms}
                backendRefs: [{name: web, port: 80}]
              - matches: [{path: {value: /slow-backend}}]
                timeouts: {request: 5s, backendRequest: 500ms}
                backendRefs: [{name: web, port: 80}]
              - matches: [{path: {value: /unhurried}}]
                timeouts: {request: 0s}
                backendRefs: [{name: web, port: 80}]
            ---
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {name: wildcard, namespace: default}
            spec:
              parentRefs: [{name: e2e}]
              hostnames: ["*.example.com"]
              rules:
              - matches: [{path: {value: /wild}}]
                backendRefs: [{name: alt, port: 80}]
              - matches: [{path: {value: /both}}]
                backendRefs: [{name: alt, port: 80}]
            ---
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {name: exact, namespace: default}
            spec:
              parentRefs: [{name: e2e}]
              hostnames: [foo.example.com]
              rules:
              - matches: [{path: {value: /both}}]
                backendRefs: [{name: web, port: 80}]
            ---
            apiVersion: gateway.networking.k8s.io/v1
            kind: GRPCRoute
            metadata: {name: health, namespace: default}
            spec:
              parentRefs: [{name: e2e, sectionName: grpc}]
              rules:
              - matches: [{method: {service: grpc.health.v1.Health, method: Check}}]
                backendRefs: [{name: health, port: 80}]
              - matches: [{method: {service: grpc.health.v1.Nowhere}}]
                backendRefs: [{name: missing, port: 80}]
            """.replace("EXTERNAL_PORT", str(ports["external"])),
    }


@dataclass
class World:
    url_host: str
    port: int
    grpc_port: int  # the listener of GRPCRoutes
    dragoman: DragomanProcess
    envoy: EnvoyProcess
    backends: dict[str, EchoBackend]
    websocket: WebSocketEchoBackend

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        timeout: float = 5.0,
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        connection = http.client.HTTPConnection(self.url_host, self.port, timeout=timeout)
        try:
            connection.request(method, path, headers=headers or {})
            response = connection.getresponse()
            body = response.read()
            response_headers = {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            data = {"body": body.decode(errors="replace")}
        return response.status, response_headers, data

    def backend_of(self, path: str, **kwargs: Any) -> str:
        status, _, data = self.request(path, **kwargs)
        return str(data.get("backend", f"HTTP {status}"))

    def rejected(self) -> dict[str, int]:
        return rejected_updates(self.envoy)

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def grpc_port() -> Iterator[int]:
    """A grpcio health service on 127.0.0.5: SERVING for the whole server ("")."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.5:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(grace=None).wait(5)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, grpc_port: int) -> Iterator[World]:
    root = tmp_path_factory.mktemp("e2e-routes")
    manifest_dir = root / "manifests"
    manifest_dir.mkdir()
    listener_port, grpc_listener_port = free_port(), free_port()
    backends = {
        "web": EchoBackend("web", host="127.0.0.2", port=free_port("127.0.0.2")),
        "alt": EchoBackend("alt", host="127.0.0.3", port=free_port("127.0.0.3")),
        "external": EchoBackend("external", host="127.0.0.4", port=free_port("127.0.0.4")),
    }
    websocket = WebSocketEchoBackend("ws", host="127.0.0.6")
    ports = {name: backend.port for name, backend in backends.items()} | {
        "grpc": grpc_port,
        "ws": websocket.port,
    }
    for name, text in manifests(listener_port, grpc_listener_port, ports).items():
        (manifest_dir / name).write_text(textwrap.dedent(text))
    for backend in backends.values():
        backend.start()
    websocket.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a(EXTERNAL_HOST, "127.0.0.4")
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifest_dir, xds_address, root / "dragoman.log").start()
    envoy = start_envoy(root, xds_address, dns.port)
    w = World("127.0.0.1", listener_port, grpc_listener_port, dragoman, envoy, backends, websocket)
    try:
        try:
            wait_until(lambda: w.backend_of("/match") == "web", timeout=20)
            wait_until(lambda: w.backend_of("/mirror") == "web", timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed the manifests:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends.values():
            backend.stop()
        websocket.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert world.rejected() == {}, world.diagnostics()


def test_header_query_method_and_regex_matches(world: World) -> None:
    assert world.backend_of("/match") == "web"
    assert world.backend_of("/match", headers={"version": "two"}) == "alt"
    assert world.backend_of("/match", headers={"version": "Two"}) == "web"  # values are exact
    assert world.backend_of("/match?animal=whale") == "alt"
    assert world.backend_of("/match?animal=whale2") == "web"
    assert world.backend_of("/match", method="DELETE") == "alt"
    assert world.backend_of("/match/v2") == "alt"
    assert world.backend_of("/match/vx") == "web"
    assert world.backend_of("/unrouted") == "HTTP 404"


def test_redirects(world: World) -> None:
    port = world.port
    cases = [
        ("/redirect-prefix/a/b?q=1", 301, f"http://127.0.0.1:{port}/moved/a/b?q=1"),
        ("/redirect-full/x", 302, f"http://example.org:{port}/elsewhere"),
        ("/redirect-https/x", 308, "https://secure.example.org/redirect-https/x"),
        ("/redirect-port/x", 307, "http://127.0.0.1:8083/redirect-port/x"),
        # The scheme's default port (443) stays out of Location, the request's port too.
        ("/redirect-scheme/x", 302, "https://127.0.0.1/redirect-scheme/x"),
    ]
    for path, status, location in cases:
        got_status, headers, _ = world.request(path)
        assert (got_status, headers.get("location")) == (status, location), path


def test_url_rewrites(world: World) -> None:
    _, _, data = world.request("/prefix/one/two?x=1")
    assert data["path"] == "/one/two?x=1"
    _, _, data = world.request("/strip/three")
    assert data["path"] == "/three"
    _, _, data = world.request("/strip")
    assert data["path"] == "/"
    _, _, data = world.request("/full/anything?keep=1")
    assert (data["path"], data["host"]) == ("/replaced?keep=1", "rewritten.example")


def test_header_modifiers_on_rule_and_backend(world: World) -> None:
    status, headers, data = world.request(
        "/headers", headers={"X-Set": "client", "X-Add": "client", "X-Remove": "gone"}
    )
    assert status == 200
    seen = data["headers"]
    assert seen["x-set"] == "set-value"
    assert seen["x-add"] == "client, added"
    assert "x-remove" not in seen
    assert seen["x-chosen"] == "web"
    assert headers["x-served-by"] == "dragoman"
    assert "x-backend" not in headers


def test_mirrors_reach_their_backends_and_an_external_one_with_its_own_host(
    world: World,
) -> None:
    alt, external = world.backends["alt"], world.backends["external"]
    before = (alt.requests, external.requests)
    status, _, data = world.request("/mirror/copy-me")
    assert (status, data["backend"]) == (200, "web")
    wait_until(lambda: (alt.requests, external.requests) > before and alt.requests > before[0])
    wait_until(lambda: external.requests > before[1], timeout=10)
    mirrored = external.last_request
    assert mirrored is not None
    assert mirrored["path"] == "/mirror/copy-me"
    assert mirrored["host"] == EXTERNAL_HOST  # not the gateway's host, not "...-shadow"
    assert alt.last_request is not None and alt.last_request["host"].startswith("127.0.0.1")


def test_timeouts_answer_504_after_the_configured_time(world: World) -> None:
    for path in ("/slow?delay=3", "/slow-backend?delay=3"):
        started = time.monotonic()
        status, _, _ = world.request(path)
        elapsed = time.monotonic() - started
        assert status == 504, path
        assert 0.4 < elapsed < 2.5, (path, elapsed)
    # Within the timeout, and with no timeout at all, the slow answer arrives.
    assert world.request("/slow?delay=0.1")[0] == 200
    assert world.request("/unhurried?delay=1")[0] == 200


def test_wildcard_route_hostname_serves_hosts_with_exact_routes(world: World) -> None:
    def backend(host: str, path: str) -> str:
        return world.backend_of(path, headers={"Host": host})

    assert backend("foo.example.com", "/wild") == "alt"
    assert backend("foo.example.com", "/both") == "web"  # the exact hostname wins
    assert backend("bar.example.com", "/both") == "alt"
    assert backend("foo.example.org", "/wild") == "HTTP 404"


def test_grpc_route_to_an_h2c_backend(world: World) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{world.grpc_port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = wait_until(
            lambda: stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2), timeout=10
        )
        assert response.status == health_pb2.HealthCheckResponse.SERVING
        # No route for this method: Envoy's 404, which gRPC reads as UNIMPLEMENTED.
        with pytest.raises(grpc.RpcError) as unrouted:
            next(iter(stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=2)))
        assert unrouted.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # A rule whose backend does not exist: UNAVAILABLE, as the Gateway API asks.
        missing = channel.unary_unary(
            "/grpc.health.v1.Nowhere/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as unavailable:
            missing(health_pb2.HealthCheckRequest(), timeout=2)
        assert unavailable.value.code() == grpc.StatusCode.UNAVAILABLE


def test_the_grpc_backend_cluster_speaks_http2(world: World) -> None:
    stats = world.envoy.stats()
    http2 = {
        k: v for k, v in stats.items() if "health/80/h2c" in k and "upstream_cx_http2_total" in k
    }
    assert http2 and all(v >= 1 for v in http2.values()), http2


def test_only_the_broken_grpc_rule_is_reported(world: World) -> None:
    log = world.dragoman.log()
    assert "HTTPRoute/default/features" not in log
    assert "GRPCRoute/default/health spec.rules[1].backendRefs[0]" in log


def test_a_websocket_upgrade_reaches_a_kubernetes_io_ws_backend(world: World) -> None:
    echoed = websocket_echo("127.0.0.1", world.port, "/websocket/chat", b"hello")

    assert echoed == b"ws: hello"
    request_line, headers = world.websocket.last_request or ("", {})
    assert request_line == "GET /websocket/chat HTTP/1.1"
    assert headers["upgrade"].lower() == "websocket"


def test_an_envoy_of_a_gateway_sharing_its_port_gets_the_gateways_clusters(world: World) -> None:
    """Gateway a-first takes the port in the every-Gateway configuration; this Envoy serves
    e2e, whose routes need clusters that configuration does not reference."""
    clusters = world.envoy.clusters_text()
    for name in ("default/web/80", "default/alt/80", "default/health/80/h2c", "default/ws/80"):
        assert f"{name}::" in clusters, name
    assert world.backend_of("/match") == "web"
    log = world.dragoman.log()
    assert "Gateway/default/e2e spec.listeners[0]" in log and "ShadowedListener" in log
