"""End to end, with a platform policy and the DNS check on (`dragoman serve --config`): a real
Envoy, backends on loopback, external names resolved through a DNS responder.

- an ExternalName naming an in-cluster Service (in another namespace, with a ReferenceGrant)
  reaches that Service's pods;
- a denied domain never gets a cluster, and nobody even resolves it;
- a public name resolving to 169.254.169.254 is refused;
- the DNS check reports NXDOMAIN for a name the responder does not know, and the addresses
  of one it knows (in `dragoman status`), and serves the name once it appears;
- in-cluster first, external fallback: an aggregate that moves to the external host when the
  pods are gone, and back when they return.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.builders import endpoint_slice, external_service, yaml_text
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
    write_manifest,
)

ROUTES = ("api", "alias", "forbidden", "meta", "ghost", "legacy")


def slice_of(service: str, namespace: str, address: str | None, port: int) -> str:
    addresses = [address] if address else []
    return yaml_text(endpoint_slice(service, port, *addresses, namespace=namespace))


def manifests(listener: int, ports: dict[str, int]) -> dict[str, str]:
    api, store, modern, legacy = ports["api"], ports["store"], ports["modern"], ports["legacy"]
    route_ports = {name: api for name in ROUTES} | {"alias": store, "legacy": legacy}
    routes = "".join(
        f"""
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: e2e}}]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]
      backendRefs: [{{name: {name}, port: {port}}}]
"""
        for name, port in route_ports.items()
    )
    return {
        "gateway.yaml": f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: e2e, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {listener}}}]
{routes}
""",
        "external.yaml": yaml_text(
            external_service("api", "api.e2e.test", api),
            external_service("forbidden", "x.forbidden.e2e.test", api),
            external_service("meta", "meta.e2e.test", api),
            external_service("ghost", "ghost.e2e.test", api),
            external_service("alias", "store.backend.svc.cluster.local", store),
        )
        + f"""
---
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {{name: aliases-from-default, namespace: backend}}
spec:
  from: [{{group: "", kind: Service, namespace: default}}]
  to: [{{group: "", kind: Service, name: store}}]
---
apiVersion: v1
kind: Service
metadata: {{name: store, namespace: backend}}
spec: {{selector: {{app: store}}, ports: [{{name: http, port: {store}}}]}}
---
{slice_of("store", "backend", "127.0.0.3", store)}
---
apiVersion: v1
kind: Service
metadata:
  name: legacy
  namespace: default
  annotations: {{dragoman.dev/prefer-service: modern}}
spec: {{type: ExternalName, externalName: legacy.e2e.test, ports: [{{port: {legacy}}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: modern, namespace: default}}
spec: {{selector: {{app: modern}}, ports: [{{name: http, port: {legacy}, targetPort: {modern}}}]}}
""",
        "modern-endpoints.yaml": slice_of("modern", "default", "127.0.0.2", modern),
    }


@dataclass
class World:
    root: Path
    manifests: Path
    config: Path
    url: str
    dns: DnsResponder
    dragoman: DragomanProcess
    envoy: EnvoyProcess
    ports: dict[str, int]

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        return get_json(self.url + path, host="gateway.e2e.test")

    def backend_of(self, path: str) -> str:
        status, data = self.get(path)
        return str(data.get("backend", f"HTTP {status}"))

    def write(self, name: str, text: str) -> None:
        write_manifest(self.manifests, name, text)

    def cluster_names(self) -> set[str]:
        dump = self.envoy.config_dump("dynamic_active_clusters")
        return {entry["cluster"]["name"] for entry in dump.get("configs", [])}

    def status(self) -> dict[str, dict[str, Any]]:
        """`dragoman status --config` of the same directory: route name -> its conditions."""
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "dragoman",
                "status",
                "--manifests",
                str(self.manifests),
                "--config",
                str(self.config),
                "--output",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        conditions = {}
        for item in json.loads(result.stdout)["items"]:
            if item["kind"] == "HTTPRoute":
                [parent] = item["status"]["parents"]
                conditions[item["metadata"]["name"]] = {c["type"]: c for c in parent["conditions"]}
        return conditions

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("external-names")
    ports = {
        "api": free_port("127.0.0.4"),
        "store": free_port("127.0.0.3"),
        "modern": free_port("127.0.0.2"),
        "legacy": free_port("127.0.0.6"),
    }
    backends = [
        EchoBackend("api", host="127.0.0.4", port=ports["api"]),
        EchoBackend("store", host="127.0.0.3", port=ports["store"]),
        EchoBackend("modern", host="127.0.0.2", port=ports["modern"]),
        EchoBackend("legacy", host="127.0.0.6", port=ports["legacy"]),
    ]
    for backend in backends:
        backend.start()
    dns = DnsResponder().start()
    dns.set_a("api.e2e.test", "127.0.0.4")
    dns.set_a("legacy.e2e.test", "127.0.0.6")
    dns.set_a("meta.e2e.test", "169.254.169.254")
    dns.set_a("x.forbidden.e2e.test", "127.0.0.4")
    listener = free_port()
    manifest_dir = root / "manifests"
    manifest_dir.mkdir()
    for name, text in manifests(listener, ports).items():
        (manifest_dir / name).write_text(text)
    config = root / "dragoman.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            externalNames:
              deniedDomains: [forbidden.e2e.test]
              # The test's backends are on loopback: an explicit exception for 127.0.0.0/8.
              allowedNetworks: [127.0.0.0/8]
              dnsCheck:
                enabled: true
                resolvers: ["127.0.0.1:{dns.port}"]
                timeout: 1s
                minInterval: 1s
                maxInterval: 2s
            # The pods too: loopback endpoint addresses are dropped unless allowed.
            endpoints: {{allowedNetworks: [127.0.0.0/8]}}
            """
        )
    )
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifest_dir, xds, root / "dragoman.log", ["--config", str(config)]
    ).start()
    envoy = start_envoy(root, xds, dns.port)
    w = World(
        root, manifest_dir, config, f"http://127.0.0.1:{listener}", dns, dragoman, envoy, ports
    )
    try:
        try:
            wait_until(lambda: w.backend_of("/api") == "api", timeout=20)
            wait_until(lambda: w.backend_of("/legacy") == "modern", timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed the manifests:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends:
            backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    rejected = rejected_updates(world.envoy)
    assert rejected == {}, world.diagnostics()


def test_an_external_name_that_resolves_into_allowed_addresses_is_served(world: World) -> None:
    status, data = world.get("/api/x")

    assert status == 200
    assert (data["backend"], data["host"]) == ("api", "api.e2e.test")


def test_an_in_cluster_name_reaches_the_pods_of_that_service(world: World) -> None:
    status, data = world.get("/alias")

    assert status == 200, world.diagnostics()
    assert data["backend"] == "store"
    assert f"backend/store/{world.ports['store']}" in world.cluster_names()
    assert not any(name.startswith("default/alias/") for name in world.cluster_names())


def test_a_denied_domain_never_gets_a_cluster_nor_a_lookup(world: World) -> None:
    assert world.get("/forbidden")[0] == 500
    assert not any(name.startswith("default/forbidden/") for name in world.cluster_names())
    assert world.dns.query_count("x.forbidden.e2e.test") == 0
    refs = world.status()["forbidden"]["ResolvedRefs"]
    assert (refs["status"], refs["reason"]) == ("False", "NotAllowedByPolicy")
    assert "denied domain 'forbidden.e2e.test'" in refs["message"]


def test_a_name_resolving_to_the_metadata_address_is_refused(world: World) -> None:
    assert world.get("/meta")[0] == 500
    assert not any(name.startswith("default/meta/") for name in world.cluster_names())
    conditions = world.status()["meta"]
    refs = conditions["ResolvedRefs"]
    assert (refs["status"], refs["reason"]) == ("False", "NotAllowedByPolicy")
    assert "resolves to 169.254.169.254, a cloud metadata address" in refs["message"]
    assert conditions["DNSResolved"]["message"] == "meta.e2e.test: 169.254.169.254"


def test_dns_check_reports_what_each_name_resolves_to(world: World) -> None:
    conditions = world.status()

    api = conditions["api"]["DNSResolved"]
    assert (api["status"], api["reason"], api["message"]) == (
        "True",
        "Resolved",
        "api.e2e.test: 127.0.0.4",
    )
    ghost = conditions["ghost"]["DNSResolved"]
    assert (ghost["status"], ghost["reason"]) == ("False", "NXDOMAIN")
    assert ghost["message"] == "ghost.e2e.test: NXDOMAIN"
    assert conditions["ghost"]["ResolvedRefs"]["reason"] == "DNSCheckFailed"
    assert "DNSResolved" not in conditions["alias"]  # an alias resolves nothing


def test_in_cluster_first_then_the_external_host(world: World) -> None:
    port = world.ports["legacy"]
    names = world.cluster_names()
    assert {
        f"default/legacy/{port}",
        f"default/legacy/{port}/external",
        f"default/modern/{port}",
    } <= names
    assert {world.backend_of("/legacy") for _ in range(5)} == {"modern"}

    # Every pod gone: the aggregate falls back to the external host, with its own name as Host.
    world.write("modern-endpoints.yaml", slice_of("modern", "default", None, world.ports["modern"]))
    try:
        wait_until(lambda: world.backend_of("/legacy") == "legacy", timeout=15)
        status, data = world.get("/legacy")
        assert (status, data["host"]) == (200, "legacy.e2e.test")
    finally:
        world.write(
            "modern-endpoints.yaml",
            slice_of("modern", "default", "127.0.0.2", world.ports["modern"]),
        )
    wait_until(lambda: world.backend_of("/legacy") == "modern", timeout=15)


def test_a_name_that_starts_to_resolve_is_served_without_any_manifest_change(
    world: World,
) -> None:
    assert world.get("/ghost")[0] == 500
    world.dns.set_a("ghost.e2e.test", "127.0.0.4")
    try:
        # The check runs again within its minimum interval (1 s) and rebuilds.
        wait_until(lambda: world.backend_of("/ghost") == "api", timeout=15)
    finally:
        world.dns.remove("ghost.e2e.test")
    assert "DNS check: ghost.e2e.test: 127.0.0.4" in world.dragoman.log()
