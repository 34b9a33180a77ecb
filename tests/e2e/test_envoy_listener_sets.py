"""End to end through a real Envoy: HTTP listeners contributed by ListenerSets (the
listenerset-* scenarios). A team's namespace adds its own HTTP listener to a shared Gateway
that allows it, and an HTTPRoute attached to the ListenerSet is served there; a ListenerSet
from a namespace the Gateway does not allow gets no listener at all, and a route attached to
it reaches nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.harness import (
    DragomanProcess,
    backend_of,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)

MANIFESTS = """
apiVersion: v1
kind: Namespace
metadata: {{name: infra}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: apps, labels: {{team: apps}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: stranger}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: shared, namespace: infra}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {gateway}}}]
  allowedListeners:
    namespaces: {{from: Selector, selector: {{matchLabels: {{team: apps}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: team, namespace: apps}}
spec:
  parentRef: {{name: shared, namespace: infra}}
  listeners: [{{name: web, protocol: HTTP, port: {team}, hostname: app.e2e.test}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: intruder, namespace: stranger}}
spec:
  parentRef: {{name: shared, namespace: infra}}
  listeners: [{{name: web, protocol: HTTP, port: {stranger}}}]
{backend_apps}
{backend_stranger}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: apps}}
spec:
  parentRefs: [{{group: gateway.networking.k8s.io, kind: ListenerSet, name: team}}]
  rules: [{{backendRefs: [{{name: web, port: {apps_port}}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: stranger}}
spec:
  parentRefs: [{{group: gateway.networking.k8s.io, kind: ListenerSet, name: intruder}}]
  rules: [{{backendRefs: [{{name: web, port: {stranger_port}}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: main, namespace: infra}}
spec:
  parentRefs: [{{name: shared}}]
  rules: [{{backendRefs: [{{name: web, port: {infra_port}, namespace: infra}}]}}]
{backend_infra}
"""


def backend(namespace: str, address: str, port: int) -> str:
    return f"""
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {namespace}}}
spec: {{selector: {{app: web}}, ports: [{{name: http, port: {port}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, namespace: {namespace}, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{{addresses: [{address}]}}]
"""


@dataclass
class World:
    manifests: Path
    listeners: dict[str, int]
    backends: dict[str, EchoBackend]
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("listenersets")
    listeners = {"gateway": free_port(), "team": free_port(), "stranger": free_port()}
    backends = {
        "infra": EchoBackend("infra", host="127.0.0.2", port=free_port("127.0.0.2")),
        "apps": EchoBackend("apps", host="127.0.0.3", port=free_port("127.0.0.3")),
        "stranger": EchoBackend("stranger", host="127.0.0.4", port=free_port("127.0.0.4")),
    }
    for server in backends.values():
        server.start()
    dns = DnsResponder().start()
    manifests = root / "manifests"
    manifests.mkdir()
    text = MANIFESTS.format(
        gateway=listeners["gateway"],
        team=listeners["team"],
        stranger=listeners["stranger"],
        apps_port=backends["apps"].port,
        stranger_port=backends["stranger"].port,
        infra_port=backends["infra"].port,
        backend_apps=backend("apps", "127.0.0.3", backends["apps"].port),
        backend_stranger=backend("stranger", "127.0.0.4", backends["stranger"].port),
        backend_infra=backend("infra", "127.0.0.2", backends["infra"].port),
    )
    (manifests / "listenersets.yaml").write_text(textwrap.dedent(text))
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifests, xds, root / "dragoman.log").start()
    envoy = start_envoy(root, xds, dns.port, node_cluster="infra/shared")
    w = World(manifests, listeners, backends, dragoman, envoy)
    try:
        try:
            url = f"http://127.0.0.1:{listeners['team']}/"
            wait_until(lambda: backend_of(url, host="app.e2e.test") == "apps", 20)
        except (TimeoutError, OSError):
            pytest.fail("Envoy never served the ListenerSet's listener:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        for server in backends.values():
            server.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_a_route_on_an_allowed_listener_set_reaches_its_backend(world: World) -> None:
    url = f"http://127.0.0.1:{world.listeners['team']}/anything"
    before = world.backends["apps"].requests
    for _ in range(10):
        assert backend_of(url, host="app.e2e.test") == "apps", world.diagnostics()
    assert world.backends["apps"].requests == before + 10


def test_the_listener_set_hostname_bounds_its_listener(world: World) -> None:
    url = f"http://127.0.0.1:{world.listeners['team']}/"
    # The listener's hostname is app.e2e.test: another Host matches no virtual host.
    assert backend_of(url, host="other.e2e.test") == "HTTP 404"


def test_the_gateway_own_listener_keeps_serving_its_own_routes(world: World) -> None:
    url = f"http://127.0.0.1:{world.listeners['gateway']}/"
    assert backend_of(url) == "infra", world.diagnostics()
    # Routes of the ListenerSet are not on the Gateway's own listener.
    assert backend_of(url, host="app.e2e.test") == "infra"


def test_a_listener_set_from_a_namespace_not_allowed_serves_nothing(world: World) -> None:
    before = world.backends["stranger"].requests
    with pytest.raises(OSError):  # no listener on that port: the connection is refused
        http_get(f"http://127.0.0.1:{world.listeners['stranger']}/", timeout=3)
    listeners = world.envoy.config_dump("dynamic_listeners")
    names = [entry["name"] for entry in listeners.get("configs", [])]
    assert not any(str(world.listeners["stranger"]) in name for name in names), names
    assert any(str(world.listeners["team"]) in name for name in names), names
    # Nor is the route attached to it served on any other listener.
    for port in (world.listeners["gateway"], world.listeners["team"]):
        assert backend_of(f"http://127.0.0.1:{port}/", host="app.e2e.test") != "stranger"
    assert world.backends["stranger"].requests == before


def test_listener_set_status_matches_what_envoy_serves(world: World) -> None:
    """`dragoman status` on the same manifests: the allowed set Accepted with its listener
    Programmed and the route attached; the stranger's set NotAllowed, its route not accepted."""
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "status", "-o", "json", "--manifests", world.manifests],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    items = {
        f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o
        for o in json.loads(result.stdout)["items"]
    }

    def condition(conditions: list[dict[str, str]], kind: str) -> tuple[str, str]:
        found = next(c for c in conditions if c["type"] == kind)
        return found["status"], found["reason"]

    team = items["ListenerSet/apps/team"]["status"]
    assert condition(team["conditions"], "Accepted") == ("True", "Accepted")
    assert condition(team["listeners"][0]["conditions"], "Programmed") == ("True", "Programmed")
    intruder = items["ListenerSet/stranger/intruder"]["status"]
    assert condition(intruder["conditions"], "Accepted") == ("False", "NotAllowed")
    app = items["HTTPRoute/apps/app"]["status"]["parents"][0]["conditions"]
    assert condition(app, "Accepted") == ("True", "Accepted")
    stranger = items["HTTPRoute/stranger/app"]["status"]["parents"][0]["conditions"]
    assert condition(stranger, "Accepted")[0] == "False"
