"""End to end: `dragoman drain` lets real Envoys stop without dropping a request.

Without it, SIGTERM made Envoy exit within milliseconds and a request in flight got no
answer. With it: requests in flight complete; requests made while Envoy drains are answered
or refused before any byte is sent, never cut mid-response; and replacing one of two Envoys
behind a round-robin balancer under steady load loses no request.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.harness import DragomanProcess, diagnostics, free_port, start_envoy
from tests.support.tcp_balancer import TcpBalancer

BACKEND_HOST = "127.0.0.7"


def manifest(ports: dict[str, int], backend_port: int) -> str:
    gateways = "".join(
        f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {port}}}]
---"""
        for name, port in ports.items()
    )
    parents = ", ".join(f"{{name: {name}}}" for name in ports)
    return f"""{gateways}
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec: {{ports: [{{name: http, port: 80, targetPort: {backend_port}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {{kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{{name: http, port: {backend_port}}}]
endpoints: [{{addresses: [{BACKEND_HOST}], conditions: {{ready: true}}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: default}}
spec:
  parentRefs: [{parents}]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
"""


@dataclass
class World:
    root: Path
    xds_address: str
    ports: dict[str, int]  # Gateway name -> its listener port; each Envoy serves one Gateway
    dragoman: DragomanProcess

    def envoy(self, gateway: str, name: str) -> EnvoyProcess:
        """An Envoy serving `gateway` alone, answering on its port."""
        workdir = self.root / name
        workdir.mkdir()
        envoy = start_envoy(workdir, self.xds_address, free_port(), f"default/{gateway}")
        try:
            envoy.wait_for(lambda: get(self.ports[gateway])[0] == 200, timeout=20)
        except BaseException:
            print(diagnostics(self.dragoman.log(), envoy))
            envoy.stop()
            raise
        return envoy


def get(port: int, path: str = "/", timeout: float = 10.0) -> tuple[int, str]:
    """GET on a fresh connection: (status, Connection header)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("connection", "")
    finally:
        connection.close()


def active_requests(envoy: EnvoyProcess) -> int:
    stats = envoy.stats(r"^http\..*\.downstream_rq_active$")
    return sum(value for name, value in stats.items() if not name.startswith("http.admin."))


def drain_command(envoy: EnvoyProcess, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "dragoman",
        "drain",
        "--admin-socket",
        str(envoy.admin_socket),
        "--interval",
        "100ms",
        *args,
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("drain")
    manifests = root / "manifests"
    manifests.mkdir()
    ports = {"gw-a": free_port(), "gw-b": free_port(), "gw-c": free_port()}
    backend = EchoBackend("web", host=BACKEND_HOST).start()
    (manifests / "world.yaml").write_text(manifest(ports, backend.port))
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifests, xds_address, root / "dragoman.log").start()
    try:
        yield World(root, xds_address, ports, dragoman)
    finally:
        dragoman.stop()
        backend.stop()


def test_a_request_in_flight_completes_and_drain_waits_for_it(world: World) -> None:
    envoy = world.envoy("gw-c", "in-flight")
    port = world.ports["gw-c"]
    try:
        with futures.ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(get, port, "/?delay=3")
            wait_until(lambda: active_requests(envoy), 5)
            started = time.monotonic()
            drained = subprocess.run(
                drain_command(envoy, "--timeout", "20s"),
                capture_output=True,
                text=True,
                timeout=30,
            )
            waited = time.monotonic() - started
            assert in_flight.result(timeout=10)[0] == 200
        assert drained.returncode == 0, drained.stderr
        assert "drained in" in drained.stdout
        # It returned once the slow request was over, not before.
        assert waited > 1.5
        assert envoy.is_running()
        # Draining failed the health check: Envoy's /ready says so.
        assert envoy.admin.request("GET", "/ready")[0] == 503
        # Now SIGTERM is safe: nothing is left to cut.
        envoy.stop()
    finally:
        envoy.stop()


def test_requests_during_the_drain_are_answered_or_refused_never_cut(world: World) -> None:
    envoy = world.envoy("gw-c", "during")
    port = world.ports["gw-c"]
    outcomes: Counter[str] = Counter()
    try:
        with futures.ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(get, port, "/?delay=2")
            wait_until(lambda: active_requests(envoy), 5)
            drain = subprocess.Popen(drain_command(envoy, "--timeout", "20s"))
            try:
                deadline = time.monotonic() + 4
                while time.monotonic() < deadline and drain.poll() is None:
                    try:
                        status, connection = get(port, "/?delay=0.05")
                        outcomes[f"{status} {connection}"] += 1
                    except ConnectionRefusedError:
                        outcomes["refused"] += 1
                    except (http.client.HTTPException, OSError) as error:
                        outcomes[f"cut: {type(error).__name__}"] += 1
                    time.sleep(0.02)
                assert drain.wait(timeout=20) == 0
            finally:
                if drain.poll() is None:
                    drain.kill()
                    drain.wait(5)
            assert in_flight.result(timeout=10)[0] == 200
    finally:
        envoy.stop()
    cut = {k: v for k, v in outcomes.items() if k.startswith("cut")}
    assert cut == {}, outcomes
    # Envoy kept answering for a while (--drain-time-s), asking clients to go, then refused.
    assert outcomes["200 close"] > 0, outcomes
    assert outcomes["refused"] > 0, outcomes
    # (Plain 200s: answered before the drain command had started.)
    assert set(outcomes) <= {"200 ", "200 close", "refused"}, outcomes


class Load:
    """Clients sending requests through the balancer, each on a fresh connection."""

    def __init__(self, port: int, clients: int = 4) -> None:
        self.port = port
        self.outcomes: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(clients)]

    def _run(self) -> None:
        deadline = time.monotonic() + 60  # a bound, should stop() never come
        for _ in range(5000):
            if self._stop.is_set() or time.monotonic() > deadline:
                return
            try:
                status, _ = get(self.port, "/?delay=0.05")
                outcome = str(status)
            except (http.client.HTTPException, OSError) as error:
                outcome = f"lost: {type(error).__name__}"
            with self._lock:
                self.outcomes[outcome] += 1

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)

    def total(self) -> int:
        with self._lock:
            return sum(self.outcomes.values())


def test_replacing_one_of_two_envoys_under_load_loses_no_request(world: World) -> None:
    first = world.envoy("gw-a", "first")
    second = world.envoy("gw-b", "second")
    replacement: EnvoyProcess | None = None
    a = ("127.0.0.1", world.ports["gw-a"])
    b = ("127.0.0.1", world.ports["gw-b"])
    try:
        with TcpBalancer([a, b]) as balancer, Load(balancer.port) as load:
            wait_until(lambda: load.total() >= 20, 10)
            # The pod is deleted: its preStop drains while its endpoint is being removed.
            drain = subprocess.Popen(drain_command(first, "--timeout", "20s"))
            try:
                time.sleep(0.3)  # the endpoint's removal reaches the balancer a bit later
                balancer.remove(a)
                assert drain.wait(timeout=25) == 0
            finally:
                if drain.poll() is None:
                    drain.kill()
                    drain.wait(5)
            first.stop()
            before = load.total()
            replacement = world.envoy("gw-a", "replacement")
            balancer.add(a)
            wait_until(lambda: load.total() >= before + 20, 10)
        outcomes = dict(load.outcomes)
    finally:
        for envoy in (first, second, replacement):
            if envoy is not None:
                envoy.stop()
    print(f"outcomes: {outcomes}")
    assert set(outcomes) == {"200"}, outcomes
    assert outcomes["200"] >= 40
    assert balancer.refused == 0
