"""End to end: HTTPRoute `retry` (GEP-1731) through a real Envoy fed by `dragoman serve`.

A flaky backend on loopback fails the first N requests carrying one `key` (with a status
code, a connection reset, or a slow answer), then succeeds, as the Gateway API conformance
tests `httproute-retry`, `httproute-retry-connection-error` and
`httproute-retry-with-timeouts` drive their echo backend. A second Service has two
endpoints, one of which refuses connections.
"""

from __future__ import annotations

import http.client
import itertools
import socket
import struct
import textwrap
import threading
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import endpoint_slice, service, yaml_text
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)

FLAKY_ADDRESS = "127.0.0.2"
REFUSING_ADDRESS, WORKING_ADDRESS = "127.0.0.3", "127.0.0.4"
BACKOFF_MS = 400


class _FlakyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int]) -> None:
        self.lock = threading.Lock()
        self.arrivals: dict[str, list[float]] = defaultdict(list)  # by key, monotonic times
        super().__init__(address, _FlakyHandler)


class _FlakyHandler(BaseHTTPRequestHandler):
    """`?key=K&fail=N&mode=M[&delay=S]`: the first N requests with key K fail as M says (a
    status code, `reset`, or `slow`: 200 after `delay` seconds), later ones answer 200."""

    protocol_version = "HTTP/1.1"
    server: _FlakyServer

    def do_GET(self) -> None:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        key = query.get("key", "")
        with self.server.lock:
            arrivals = self.server.arrivals[key]
            arrivals.append(time.monotonic())
            attempt = len(arrivals)
        mode = query.get("mode", "503")
        if attempt > int(query.get("fail", "0")):
            self._answer(200, f"attempt {attempt}")
        elif mode == "reset":
            # SO_LINGER 0: closing sends a TCP reset instead of a graceful FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
        elif mode == "slow":
            time.sleep(float(query.get("delay", "1")))
            self._answer(200, f"attempt {attempt}, late")
        else:
            time.sleep(float(query.get("delay", "0")))
            self._answer(int(mode), f"attempt {attempt} failed")

    def _answer(self, status: int, body: str) -> None:
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # Envoy gave up on this attempt (a per-try timeout)

    def log_message(self, format: str, *args: object) -> None:
        pass


class FlakyBackend:
    def __init__(self, host: str, port: int = 0) -> None:
        self.server = _FlakyServer((host, port))
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def attempts(self, key: str) -> list[float]:
        with self.server.lock:
            return list(self.server.arrivals[key])


def manifests(listener_port: int, flaky_port: int, pair_port: int) -> dict[str, str]:
    return {
        "gateway.yaml": f"""
            apiVersion: gateway.networking.k8s.io/v1
            kind: Gateway
            metadata: {{name: e2e, namespace: default}}
            spec:
              gatewayClassName: dragoman
              listeners: [{{name: http, protocol: HTTP, port: {listener_port}}}]
            """,
        "services.yaml": yaml_text(
            service("flaky", 80, flaky_port, port_name="main"),
            endpoint_slice("flaky", {"main": flaky_port}, FLAKY_ADDRESS),
            service("pair", 80, pair_port, port_name="main"),
            endpoint_slice("pair", {"main": pair_port}, REFUSING_ADDRESS, WORKING_ADDRESS),
        ),
        "routes.yaml": f"""
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {{name: retries, namespace: default}}
            spec:
              parentRefs: [{{name: e2e}}]
              rules:
              - matches: [{{path: {{value: /codes}}}}]
                retry: {{attempts: 2, codes: [503]}}
                backendRefs: [{{name: flaky, port: 80}}]
              - matches: [{{path: {{value: /plain}}}}]
                backendRefs: [{{name: flaky, port: 80}}]
              - matches: [{{path: {{value: /connection}}}}]
                retry: {{attempts: 3}}
                backendRefs: [{{name: flaky, port: 80}}]
              - matches: [{{path: {{value: /backend-timeout}}}}]
                retry: {{attempts: 2}}
                timeouts: {{backendRequest: 1s}}
                backendRefs: [{{name: flaky, port: 80}}]
              - matches: [{{path: {{value: /request-timeout}}}}]
                retry: {{attempts: 5, codes: [500]}}
                timeouts: {{request: 2s, backendRequest: 1s}}
                backendRefs: [{{name: flaky, port: 80}}]
              - matches: [{{path: {{value: /backoff}}}}]
                retry: {{attempts: 1, codes: [503], backoff: {BACKOFF_MS}ms}}
                backendRefs: [{{name: flaky, port: 80}}]
              - matches: [{{path: {{value: /pair-retried}}}}]
                retry: {{attempts: 2}}
                backendRefs: [{{name: pair, port: 80}}]
              - matches: [{{path: {{value: /pair}}}}]
                backendRefs: [{{name: pair, port: 80}}]
            """,
    }


@dataclass
class World:
    port: int
    dragoman: DragomanProcess
    envoy: EnvoyProcess
    flaky: FlakyBackend
    keys: Iterator[int]

    def get(self, path: str) -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            connection.close()

    def flaky_get(self, path: str, **query: object) -> tuple[int, str, list[float]]:
        """A request under a fresh key: its status, body and the backend's attempts at it."""
        key = f"k{next(self.keys)}"
        params = urllib.parse.urlencode({"key": key, **query})
        status, body = self.get(f"{path}?{params}")
        return status, body, self.flaky.attempts(key)

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


def _pair_port() -> int:
    """A port free on the working address and on the one that refuses connections."""
    while True:
        port = free_port(WORKING_ADDRESS)
        with socket.socket() as probe:
            if probe.connect_ex((REFUSING_ADDRESS, port)) != 0:
                return port


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("e2e-retries")
    manifest_dir = root / "manifests"
    manifest_dir.mkdir()
    flaky = FlakyBackend(FLAKY_ADDRESS)
    pair_port = _pair_port()
    working = FlakyBackend(WORKING_ADDRESS, pair_port)  # nothing listens on the refusing one
    listener_port = free_port()
    for name, text in manifests(listener_port, flaky.port, pair_port).items():
        (manifest_dir / name).write_text(textwrap.dedent(text))
    flaky.start()
    working.start()
    dns = DnsResponder()
    dns.start()
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifest_dir, xds_address, root / "dragoman.log").start()
    envoy = start_envoy(root, xds_address, dns.port)
    w = World(listener_port, dragoman, envoy, flaky, itertools.count())
    try:
        try:
            wait_until(lambda: w.flaky_get("/plain")[0] == 200, timeout=20)
            wait_until(lambda: w.get("/pair-retried")[0] == 200, timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed the manifests:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        flaky.stop()
        working.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_listed_codes_are_retried_up_to_attempts(world: World) -> None:
    status, body, attempts = world.flaky_get("/codes", fail=2, mode=503)
    assert (status, body, len(attempts)) == (200, "attempt 3", 3)
    # Two retries are not enough for three failures: the client sees the last one.
    status, _, attempts = world.flaky_get("/codes", fail=3, mode=503)
    assert (status, len(attempts)) == (503, 3)


def test_without_retry_the_first_failure_reaches_the_client(world: World) -> None:
    status, _, attempts = world.flaky_get("/plain", fail=1, mode=503)
    assert (status, len(attempts)) == (503, 1)
    status, _, attempts = world.flaky_get("/plain", fail=1, mode="reset")
    assert (status, len(attempts)) == (503, 1)


def test_codes_not_listed_are_not_retried(world: World) -> None:
    for code in (500, 502, 504):
        status, _, attempts = world.flaky_get("/codes", fail=1, mode=code)
        assert (status, len(attempts)) == (code, 1)
    # A rule with retry but no codes retries no status code.
    status, _, attempts = world.flaky_get("/connection", fail=1, mode=503)
    assert (status, len(attempts)) == (503, 1)


def test_connection_resets_are_retried(world: World) -> None:
    """httproute-retry-connection-error: attempts 3, the backend resets the connection."""
    status, body, attempts = world.flaky_get("/connection", fail=2, mode="reset")
    assert (status, body, len(attempts)) == (200, "attempt 3", 3)
    status, _, attempts = world.flaky_get("/connection", fail=4, mode="reset")
    assert status in (500, 503)
    assert len(attempts) == 4


def test_refused_connections_are_retried_on_another_endpoint(world: World) -> None:
    """One of the Service's two endpoints refuses connections: without retry some requests
    fail, with it none does."""
    retried = [world.get("/pair-retried")[0] for _ in range(12)]
    plain = [world.get("/pair")[0] for _ in range(12)]
    assert retried == [200] * 12
    assert 503 in plain


def test_a_backend_request_timeout_bounds_each_attempt(world: World) -> None:
    """httproute-retry-with-timeouts: attempts that outlast backendRequest are retried."""
    status, body, attempts = world.flaky_get("/backend-timeout", fail=2, mode="slow", delay=1.5)
    assert (status, body, len(attempts)) == (200, "attempt 3", 3)
    status, _, attempts = world.flaky_get("/backend-timeout", fail=3, mode="slow", delay=1.5)
    assert (status, len(attempts)) == (504, 3)


def test_the_request_timeout_bounds_every_attempt_together(world: World) -> None:
    status, body, _ = world.flaky_get("/request-timeout", fail=1, mode=500)
    assert (status, body) == (200, "attempt 2")
    # Four failures of 0.8 s each outlast the 2 s request timeout, attempts notwithstanding.
    started = time.monotonic()
    status, _, attempts = world.flaky_get("/request-timeout", fail=4, mode=500, delay=0.8)
    assert status == 504
    assert len(attempts) < 5
    assert time.monotonic() - started < 4


def test_backoff_spaces_the_retries(world: World) -> None:
    """Envoy waits a random time up to the back-off before the first retry: over eight
    requests at least one wait is a good part of it (all eight below 30% of it: 0.3 ** 8
    odds), and none is much longer."""
    gaps = []
    for _ in range(8):
        status, _, attempts = world.flaky_get("/backoff", fail=1, mode=503)
        assert (status, len(attempts)) == (200, 2)
        gaps.append(attempts[1] - attempts[0])
    assert max(gaps) >= 0.3 * BACKOFF_MS / 1000, gaps
    assert max(gaps) < BACKOFF_MS / 1000 + 2, gaps
