"""End to end: manifests in a directory, dragoman serving them, a real Envoy routing real
requests to pod-backed endpoints and to an ExternalName host resolved through a DNS
responder on loopback."""

from __future__ import annotations

import json
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
    write_manifest,
)

EXTERNAL_HOST = "api.e2e.test"


def manifests(listener_port: int, web_port: int, api_port: int, local_port: int) -> dict[str, str]:
    return {
        "gateway.yaml": f"""
            apiVersion: gateway.networking.k8s.io/v1
            kind: Gateway
            metadata: {{name: e2e, namespace: default}}
            spec:
              gatewayClassName: dragoman
              listeners:
                - {{name: http, protocol: HTTP, port: {listener_port}}}
            """,
        "services.yaml": f"""
            apiVersion: v1
            kind: Service
            metadata: {{name: web, namespace: default}}
            spec:
              selector: {{app: web}}
              ports: [{{name: http, port: 80, targetPort: {web_port}}}]
            ---
            apiVersion: discovery.k8s.io/v1
            kind: EndpointSlice
            metadata:
              name: web-1
              namespace: default
              labels: {{kubernetes.io/service-name: web}}
            addressType: IPv4
            ports: [{{name: http, port: {web_port}}}]
            endpoints:
              - addresses: [127.0.0.2]
                conditions: {{ready: true}}
              - addresses: [127.0.0.3]
                conditions: {{ready: false}}
            ---
            apiVersion: v1
            kind: Service
            metadata: {{name: api, namespace: default}}
            spec:
              type: ExternalName
              externalName: {EXTERNAL_HOST}.
              ports: [{{port: {api_port}}}]
            ---
            apiVersion: v1
            kind: Service
            metadata: {{name: sneaky, namespace: default}}
            spec:
              type: ExternalName
              externalName: LOCALHOST
              ports: [{{port: {local_port}}}]
            ---
            apiVersion: v1
            kind: Service
            metadata: {{name: literal, namespace: default}}
            spec:
              type: ExternalName
              externalName: 127.0.0.1
              ports: [{{port: {local_port}}}]
            """,
        "routes.yaml": """
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {name: e2e, namespace: default}
            spec:
              parentRefs: [{name: e2e}]
              rules:
                - matches: [{path: {type: PathPrefix, value: /external}}]
                  backendRefs: [{name: api, port: API_PORT}]
                - matches: [{path: {type: PathPrefix, value: /split}}]
                  backendRefs:
                    - {name: web, port: 80, weight: 1}
                    - {name: api, port: API_PORT, weight: 1}
                - matches: [{path: {type: Exact, value: /local}}]
                  backendRefs: [{name: sneaky, port: LOCAL_PORT}]
                - matches: [{path: {type: Exact, value: /literal}}]
                  backendRefs: [{name: literal, port: LOCAL_PORT}]
                - backendRefs: [{name: web, port: 80}]
            """.replace("API_PORT", str(api_port)).replace("LOCAL_PORT", str(local_port)),
    }


@dataclass
class World:
    root: Path
    manifests: Path
    url: str
    dns: DnsResponder
    dragoman: DragomanProcess
    envoy: EnvoyProcess
    backends: dict[str, EchoBackend]

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        return get_json(self.url + path)

    def backend_of(self, path: str) -> str:
        status, data = self.get(path)
        return data.get("backend", f"HTTP {status}")

    def write(self, name: str, text: str) -> None:
        write_manifest(self.manifests, name, text)

    def rejected(self) -> dict[str, int]:
        return rejected_updates(self.envoy)

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("e2e")
    manifest_dir = root / "manifests"
    manifest_dir.mkdir()
    listener_port = free_port()
    web_port = free_port("127.0.0.2")
    api_port = free_port("127.0.0.4")
    local_port = free_port()
    for name, text in manifests(listener_port, web_port, api_port, local_port).items():
        (manifest_dir / name).write_text(textwrap.dedent(text))

    backends = {
        "web-ready": EchoBackend("web-ready", host="127.0.0.2", port=web_port),
        "web-not-ready": EchoBackend("web-not-ready", host="127.0.0.3", port=web_port),
        "api": EchoBackend("api", host="127.0.0.4", port=api_port),
        "api-moved": EchoBackend("api-moved", host="127.0.0.5", port=api_port),
        # Listens where the refused `localhost` ExternalName points: must never be reached.
        "local": EchoBackend("local", host="127.0.0.1", port=local_port),
    }
    for backend in backends.values():
        backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a(EXTERNAL_HOST, "127.0.0.4")
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifest_dir, xds_address, root / "dragoman.log").start()
    envoy = start_envoy(root, xds_address, dns.port)
    w = World(
        root, manifest_dir, f"http://127.0.0.1:{listener_port}", dns, dragoman, envoy, backends
    )
    try:
        try:
            wait_until(lambda: w.backend_of("/") == "web-ready", timeout=20)
            wait_until(lambda: w.backend_of("/external") == "api", timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed the manifests:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends.values():
            backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert world.rejected() == {}, world.diagnostics()


def test_external_name_reaches_host_with_external_host_header(world: World) -> None:
    status, data = world.get("/external/things?x=1")
    assert status == 200, world.diagnostics()
    assert data["backend"] == "api"
    assert data["host"] == EXTERNAL_HOST
    assert data["path"] == "/external/things?x=1"


def test_eds_routes_only_to_ready_endpoints(world: World) -> None:
    seen = Counter(world.backend_of("/anything") for _ in range(20))
    assert seen == {"web-ready": 20}


def test_pod_backed_route_keeps_the_client_host_header(world: World) -> None:
    status, _, body = http_get(world.url + "/", host="shop.example.com")
    assert status == 200
    assert json.loads(body)["host"].split(":")[0] == "shop.example.com"


def test_weighted_backends_mix_external_and_pod_backed(world: World) -> None:
    seen = Counter(world.backend_of("/split") for _ in range(60))
    assert set(seen) == {"web-ready", "api"}, seen
    assert min(seen.values()) >= 10, seen


@pytest.mark.parametrize(("path", "service"), [("/local", "sneaky"), ("/literal", "literal")])
def test_unsafe_external_name_answers_500_and_never_reaches_local_port(
    world: World, path: str, service: str
) -> None:
    before = world.backends["local"].requests
    status, _ = world.get(path)
    assert status == 500
    assert world.backends["local"].requests == before
    log = world.dragoman.log()  # the refusal is logged, naming the Service and why
    assert f"default/{service}" in log and "UnsafeExternalName" in log


def test_dns_answer_change_is_followed(world: World) -> None:
    world.dns.set_a(EXTERNAL_HOST, "127.0.0.5")
    try:
        wait_until(lambda: world.backend_of("/external") == "api-moved", timeout=15)
    finally:
        world.dns.set_a(EXTERNAL_HOST, "127.0.0.4")
    wait_until(lambda: world.backend_of("/external") == "api", timeout=15)


def test_endpoint_slice_edit_takes_the_fast_path(world: World) -> None:
    services = (world.manifests / "services.yaml").read_text()
    ready = services.replace("conditions: {ready: false}", "conditions: {ready: true}")
    assert ready != services
    world.write("services.yaml", ready)
    try:
        wait_until(
            lambda: {world.backend_of("/") for _ in range(10)} == {"web-ready", "web-not-ready"},
            timeout=10,
        )
        assert "endpoints update" in world.dragoman.log()
    finally:
        world.write("services.yaml", services)
    wait_until(lambda: {world.backend_of("/") for _ in range(10)} == {"web-ready"}, timeout=10)


def test_manifest_edit_is_applied_within_seconds(world: World) -> None:
    route = (
        """
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {name: extra, namespace: default}
        spec:
          parentRefs: [{name: e2e}]
          rules:
            - matches: [{path: {type: Exact, value: /added}}]
              backendRefs: [{name: api, port: API_PORT}]
        """
    ).replace("API_PORT", str(world.backends["api"].port))
    started = time.monotonic()
    world.write("extra.yaml", route)
    wait_until(lambda: world.backend_of("/added") == "api", timeout=10)
    applied_after = time.monotonic() - started
    assert applied_after < 2.5, applied_after
    (world.manifests / "extra.yaml").unlink()
    wait_until(lambda: world.backend_of("/added") == "web-ready", timeout=10)


def test_malformed_file_is_reported_and_tolerated(world: World) -> None:
    world.write("broken.yaml", "kind: Service\napiVersion: v1\nmetadata: {name: [oops\n")
    world.write(
        "bad-port.yaml",
        """
        apiVersion: v1
        kind: Service
        metadata: {name: bad, namespace: default}
        spec:
          ports: [{port: seventy}]
        """,
    )
    try:
        wait_until(lambda: "bad-port.yaml" in world.dragoman.log(), timeout=10)
        log = world.dragoman.log()
        assert "broken.yaml" in log
        assert "Service/default/bad" in log and "spec.ports[0].port" in log
        assert world.dragoman.process is not None and world.dragoman.process.poll() is None
        assert world.backend_of("/external") == "api"
        assert world.backend_of("/") == "web-ready"
    finally:
        (world.manifests / "broken.yaml").unlink()
        (world.manifests / "bad-port.yaml").unlink()


def test_restarting_dragoman_causes_no_outage_and_no_envoy_change(world: World) -> None:
    watched = (
        "cluster_manager.cluster_modified",
        "cluster_manager.cluster_added",
        "cluster_manager.cluster_removed",
        "listener_manager.listener_modified",
        "listener_manager.listener_added",
        "listener_manager.listener_removed",
    )
    before = world.envoy.stats()
    served_before = served_versions(world.envoy)
    connected_before = before.get("control_plane.connected_state")
    assert connected_before == 1
    world.dragoman.stop(kill=True)
    wait_until(lambda: world.envoy.stats().get("control_plane.connected_state") == 0, timeout=10)
    outage = [world.backend_of(p) for p in ("/", "/external") for _ in range(5)]
    world.dragoman.start()
    wait_until(lambda: world.envoy.stats().get("control_plane.connected_state") == 1, timeout=20)
    # Let the new server answer every type, then check Envoy changed nothing.
    time.sleep(1.5)
    outage += [world.backend_of(p) for p in ("/", "/external") for _ in range(5)]
    after = world.envoy.stats()
    assert set(outage) == {"web-ready", "api"}, outage
    assert {k: after.get(k) for k in watched} == {k: before.get(k) for k in watched}, (
        world.diagnostics()
    )
    # Same versions (content hashes survive a restart), and nothing re-applied at all.
    assert served_versions(world.envoy) == served_before


def served_versions(envoy: EnvoyProcess) -> dict[str, tuple[str, str]]:
    """Every dynamic cluster, listener and route table: (version_info, last_updated)."""
    versions: dict[str, tuple[str, str]] = {}
    for config in envoy.config_dump()["configs"]:
        for entry in config.get("dynamic_active_clusters", []):
            versions[f"cluster {entry['cluster']['name']}"] = (
                entry["version_info"],
                entry["last_updated"],
            )
        for entry in config.get("dynamic_listeners", []):
            state = entry["active_state"]
            versions[f"listener {entry['name']}"] = (state["version_info"], state["last_updated"])
        for entry in config.get("dynamic_route_configs", []):
            versions[f"routes {entry['route_config']['name']}"] = (
                entry["version_info"],
                entry["last_updated"],
            )
    assert versions, "Envoy holds no dynamic configuration"
    return versions


def test_envoy_starts_with_a_downstream_connection_limit(world: World) -> None:
    # The bootstrap sets the overload manager's global connection limit: Envoy warns at
    # every start without one.
    log = world.envoy.log_path.read_text(errors="replace")
    assert "starting main dispatch loop" in log
    assert "no configured limit to the number of allowed active downstream" not in log
