"""End to end, DNS rebinding: with the DNS check on, the addresses dragoman checked are the only
ones a real Envoy connects to.

A DNS responder on loopback answers one external name with an allowed backend address, then
with another (a legitimate change, followed within the TTL), then with 127.0.0.1, where a
listener on the same port counts every connection it gets. Envoy keeps sending to the last
accepted address for the grace, then answers 503, and never connects to 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
)

NAME = "flip.e2e.test"
GRACE_S = 3


class ConnectionCounter:
    """A TCP listener that counts (and closes) every connection it accepts."""

    def __init__(self, host: str, port: int) -> None:
        self.count = 0
        self._socket = socket.create_server((host, port))
        self._socket.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.count += 1
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()


def manifests(listener: int, port: int) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: e2e, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {listener}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: flip, namespace: default}}
spec: {{type: ExternalName, externalName: {NAME}, ports: [{{port: {port}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: flip, namespace: default}}
spec:
  parentRefs: [{{name: e2e}}]
  rules: [{{backendRefs: [{{name: flip, port: {port}}}]}}]
"""


@dataclass
class World:
    url: str
    dns: DnsResponder
    counter: ConnectionCounter
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def get(self) -> tuple[int, dict[str, Any]]:
        return get_json(self.url + "/", host="gateway.e2e.test")

    def backend(self) -> str:
        status, data = self.get()
        return str(data.get("backend", f"HTTP {status}"))

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    port = free_port("127.0.0.2")
    backends = [
        EchoBackend("two", host="127.0.0.2", port=port).start(),
        EchoBackend("three", host="127.0.0.3", port=port).start(),
    ]
    # Where a rebinding answer points: the same port on 127.0.0.1.
    counter = ConnectionCounter("127.0.0.1", port)
    dns = DnsResponder(ttl=1).start()
    dns.set_a(NAME, "127.0.0.2")
    manifest_dir = tmp_path / "manifests"
    manifest_dir.mkdir()
    listener = free_port()
    (manifest_dir / "all.yaml").write_text(manifests(listener, port))
    config = tmp_path / "dragoman.yaml"
    config.write_text(
        "externalNames:\n"
        "  allowedNetworks: [127.0.0.2/32, 127.0.0.3/32]\n"
        "  dnsCheck:\n"
        "    enabled: true\n"
        f"    resolvers: ['127.0.0.1:{dns.port}']\n"
        "    minInterval: 1s\n"
        "    maxInterval: 2s\n"
        f"    grace: {GRACE_S}s\n"
    )
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifest_dir, xds, tmp_path / "dragoman.log", ["--config", str(config)]
    ).start()
    # Envoy's own resolver is the same responder: were it asked, it would get 127.0.0.1 too.
    envoy = start_envoy(tmp_path, xds, dns.port)
    w = World(f"http://127.0.0.1:{listener}", dns, counter, dragoman, envoy)
    try:
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        counter.stop()
        for backend in backends:
            backend.stop()


def test_envoy_never_connects_to_an_address_the_dns_check_refused(world: World) -> None:
    try:
        wait_until(lambda: world.backend() == "two", timeout=20)
    except TimeoutError:
        pytest.fail("the checked name never served:\n" + world.diagnostics())
    dump = world.envoy.config_dump("dynamic_active_clusters")
    [cluster] = [entry["cluster"] for entry in dump["configs"]]
    assert cluster["type"] == "EDS"  # Envoy resolves nothing itself

    # A legitimate change is followed within the TTL (1 s; re-checked at most 2 s later).
    world.dns.set_a(NAME, "127.0.0.3")
    changed = time.monotonic()
    wait_until(lambda: world.backend() == "three", timeout=10)
    assert time.monotonic() - changed < 5

    # Rebinding to 127.0.0.1: the last accepted address keeps serving for the grace ...
    world.dns.set_a(NAME, "127.0.0.1")
    flipped = time.monotonic()
    answers = []
    while time.monotonic() - flipped < GRACE_S + 6:
        answers.append(world.backend())
        if answers[-1] == "HTTP 503":
            break
        time.sleep(0.05)
    # ... then the backend answers 503: nothing was served but what was checked.
    assert answers[-1] == "HTTP 503", answers[-20:]
    assert set(answers) <= {"three", "HTTP 503"}, set(answers)
    assert answers.count("three") > 0
    assert time.monotonic() - flipped >= GRACE_S - 1
    for _ in range(20):
        assert world.backend() == "HTTP 503"
    assert world.counter.count == 0, world.diagnostics()
    log = world.dragoman.log()
    assert f"{NAME}: 127.0.0.1 refused" in log, log[-3000:]

    # An allowed answer again: served again.
    world.dns.set_a(NAME, "127.0.0.2")
    wait_until(lambda: world.backend() == "two", timeout=10)
    assert world.counter.count == 0
    assert rejected_updates(world.envoy) == {}, world.diagnostics()
