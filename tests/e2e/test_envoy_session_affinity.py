"""End to end: `sessionAffinity: ClientIP` with a real Envoy. Requests are sent from chosen
source addresses on loopback (127.0.0.x), each on a new connection: every request from one
source reaches one pod, and sources spread over the pods. A Service without affinity over
the same pods spreads one source's requests (so the test can tell the two apart); an
ExternalName Service with affinity over its checked addresses behaves like a pod-backed one.
"""

from __future__ import annotations

import json
import socket
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.harness import DragomanProcess, diagnostics, free_port, start_envoy

PODS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
EXTERNAL = "sticky.e2e.test"


def manifests(listener: int, port: int) -> str:
    endpoints = "".join(f"\n  - {{addresses: [{pod}]}}" for pod in PODS)
    slices = "".join(
        f"""
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {name}-1, namespace: default, labels: {{kubernetes.io/service-name: {name}}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints:{endpoints}
"""
        for name in ("sticky", "spread")
    )
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
metadata: {{name: sticky, namespace: default}}
spec:
  selector: {{app: web}}
  sessionAffinity: ClientIP
  sessionAffinityConfig: {{clientIP: {{timeoutSeconds: 600}}}}
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: spread, namespace: default}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: outside, namespace: default}}
spec:
  type: ExternalName
  externalName: {EXTERNAL}
  sessionAffinity: ClientIP
  ports: [{{port: {port}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: routes, namespace: default}}
spec:
  parentRefs: [{{name: e2e}}]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: /sticky}}}}]
      backendRefs: [{{name: sticky, port: 80}}]
    - matches: [{{path: {{type: PathPrefix, value: /spread}}}}]
      backendRefs: [{{name: spread, port: 80}}]
    - matches: [{{path: {{type: PathPrefix, value: /outside}}}}]
      backendRefs: [{{name: outside, port: {port}}}]
{slices}
"""


def get_from(source: str, port: int, path: str) -> str:
    """The backend answering a GET sent from `source` (a loopback address), new connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as s:
        s.sendall(
            f"GET {path} HTTP/1.1\r\nHost: gateway.e2e.test\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1].decode()
    if status != "200":
        return f"HTTP {status}"
    return str(json.loads(body)["backend"])


@dataclass
class World:
    port: int
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def backends(self, source: str, path: str, count: int) -> Counter[str]:
        return Counter(get_from(source, self.port, path) for _ in range(count))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root: Path = tmp_path_factory.mktemp("affinity")
    port = free_port("127.0.0.2")
    backends = [EchoBackend(f"pod-{pod.rsplit('.', 1)[1]}", host=pod, port=port) for pod in PODS]
    for backend in backends:
        backend.start()
    dns = DnsResponder().start()
    dns.set_a(EXTERNAL, *PODS)
    listener = free_port()
    manifest_dir = root / "manifests"
    manifest_dir.mkdir()
    (manifest_dir / "all.yaml").write_text(textwrap.dedent(manifests(listener, port)))
    config = root / "dragoman.yaml"
    config.write_text(
        "endpoints: {allowedNetworks: [127.0.0.0/8]}\n"
        "externalNames:\n"
        "  allowedNetworks: [127.0.0.0/8]\n"
        f"  dnsCheck: {{enabled: true, resolvers: ['127.0.0.1:{dns.port}'], minInterval: 1s}}\n"
    )
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifest_dir, xds, root / "dragoman.log", ["--config", str(config)])
    dragoman.start()
    envoy = start_envoy(root, xds, dns.port)
    w = World(listener, dragoman, envoy)
    try:
        try:
            for path in ("/sticky", "/spread", "/outside"):
                wait_until(lambda p=path: get_from("127.0.0.1", listener, p) != "HTTP 404", 20)
                wait_until(lambda p=path: get_from("127.0.0.1", listener, p).startswith("pod"), 20)
        except TimeoutError:
            pytest.fail("routes never served:\n" + diagnostics(dragoman.log(), envoy))
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends:
            backend.stop()


@pytest.mark.parametrize("path", ["/sticky", "/outside"])
def test_one_source_address_keeps_reaching_one_backend(world: World, path: str) -> None:
    seen = world.backends("127.0.0.10", path, 50)
    assert len(seen) == 1 and sum(seen.values()) == 50, seen
    assert next(iter(seen)).startswith("pod-"), seen


@pytest.mark.parametrize("path", ["/sticky", "/outside"])
def test_sources_spread_over_the_backends(world: World, path: str) -> None:
    chosen = {}
    for last in range(11, 41):
        seen = world.backends(f"127.0.0.{last}", path, 3)
        assert len(seen) == 1, (last, seen)  # each source sticks
        chosen[last] = next(iter(seen))
    # 30 sources over 4 pods: a hash puts them on several (all four, almost surely).
    assert len(set(chosen.values())) >= 3, Counter(chosen.values())


def test_without_affinity_one_source_is_spread(world: World) -> None:
    seen = world.backends("127.0.0.10", "/spread", 20)
    assert len(seen) >= 3, seen


def test_the_affinity_clusters_are_ring_hash_and_the_timeout_is_reported(world: World) -> None:
    dump = world.envoy.config_dump("dynamic_active_clusters")
    policies = {
        entry["cluster"]["name"]: entry["cluster"].get("lb_policy", "ROUND_ROBIN")
        for entry in dump["configs"]
    }
    assert policies["default/sticky/80"] == "RING_HASH"
    assert policies["default/spread/80"] == "ROUND_ROBIN"
    assert [v for k, v in policies.items() if k.startswith("default/outside/")] == ["RING_HASH"]
    log = world.dragoman.log()
    warned = [line for line in log.splitlines() if "timeoutSeconds 600" in line]
    assert len(warned) == 1 and "Service/default/sticky" in warned[0], warned
