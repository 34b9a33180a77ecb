"""A real Envoy while an ExternalName Service's port (or an XBackend's) changes: not one
request refused.

A new port number used to mean a new cluster name: the route switched to it before that
strict-DNS cluster had resolved, and Envoy answered 503 meanwhile. The cluster is named for
the port's name now (a Service port's `name`, an XBackend's `spec.port.name`), so Envoy
updates it in place and the old one serves until the new one has resolved.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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
    start_envoy,
    write_manifest,
)

HOST = "moving.e2e.test"
CHANGES = 6


def manifest(listener_port: int, port: int, kind: str) -> str:
    return GATEWAY.format(listener_port=listener_port) + (
        SERVICE if kind == "Service" else XBACKEND
    ).format(host=HOST, port=port)


GATEWAY = """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: e2e, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {listener_port}}}]
---
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {{name: moving, namespace: default}}
spec: {{type: ExternalName, externalName: {host}, ports: [{{name: http, port: {port}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: moving, namespace: default}}
spec:
  parentRefs: [{{name: e2e}}]
  rules: [{{backendRefs: [{{name: moving, port: {port}}}]}}]
"""
XBACKEND = """\
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackend
metadata: {{name: moving, namespace: default}}
spec:
  type: ExternalHostname
  externalHostname: {{hostname: {host}}}
  port: {{name: http, port: {port}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: moving, namespace: default}}
spec:
  parentRefs: [{{name: e2e}}]
  rules: [{{backendRefs: [{{group: gateway.networking.x-k8s.io, kind: XBackend, name: moving}}]}}]
"""
# The one cluster each kind is served by, named for the port's name.
CLUSTERS = {"Service": "default/moving/http", "XBackend": "xbackend/default/moving/http"}


@dataclass
class World:
    root: Path
    kind: str
    listener_port: int
    ports: dict[str, int]  # backend name -> port
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def get(self) -> tuple[int, str]:
        status, data = get_json(f"http://127.0.0.1:{self.listener_port}/")
        return status, str(data.get("backend", ""))

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module", params=sorted(CLUSTERS))
def world(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[World]:
    kind: str = request.param
    root = tmp_path_factory.mktemp("port-change")
    manifests = root / "manifests"
    manifests.mkdir()
    listener_port = free_port()
    ports = {"blue": free_port("127.0.0.6"), "green": free_port("127.0.0.6")}
    backends = [EchoBackend(name, host="127.0.0.6", port=port) for name, port in ports.items()]
    for backend in backends:
        backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a(HOST, "127.0.0.6")
    write_manifest(manifests, "moving.yaml", manifest(listener_port, ports["blue"], kind))
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifests, xds_address, root / "dragoman.log").start()
    envoy = start_envoy(root, xds_address, dns.port)
    w = World(root, kind, listener_port, ports, dragoman, envoy)
    try:
        try:
            wait_until(lambda: w.get() == (200, "blue"), timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed the Service:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends:
            backend.stop()


def test_a_port_change_refuses_no_request(world: World) -> None:
    answers: Counter[tuple[int, str]] = Counter()
    current = "blue"
    for _ in range(CHANGES):
        current = "green" if current == "blue" else "blue"
        write_manifest(
            world.root / "manifests",
            "moving.yaml",
            manifest(world.listener_port, world.ports[current], world.kind),
        )
        deadline = time.monotonic() + 10
        while True:
            answer = world.get()
            answers[answer] += 1
            if answer == (200, current):
                break
            assert time.monotonic() < deadline, world.diagnostics()
    refused = {answer: n for answer, n in answers.items() if answer[0] != 200}
    assert refused == {}, world.diagnostics()
    # One cluster all along, updated in place: named for the port's name.
    names = {
        line.split("::", 1)[0]
        for line in world.envoy.clusters_text().splitlines()
        if line.startswith(("default/", "xbackend/"))
    }
    assert names == {CLUSTERS[world.kind]}
