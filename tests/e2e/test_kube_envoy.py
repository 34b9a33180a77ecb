"""End to end in Kubernetes mode: objects in an API server (the in-process one, over real
HTTP), `dragoman serve --kubernetes --kubeconfig` as a separate process, and a real Envoy
routing real requests to pod-backed endpoints and to an ExternalName host, following
changes to Services, EndpointSlices, routes, the Gateway and the Secret of an HTTPS
listener."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.builders import (
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    http_route,
    service,
    tls_secret,
)
from tests.support.certificates import certificate_authority
from tests.support.harness import (
    DragomanProcess,
    backend_of,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
)
from tests.support.kube_process import KubeDragomanProcess
from tests.support.kube_replica import (
    deployed_envoy_bootstrap,
    deployed_tls,
)
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(180)

EXTERNAL_HOST = "api.kube-e2e.test"
TLS_HOST = "secure.kube-e2e.test"


@dataclass
class World:
    api: KubeApiServer
    url: str
    listener_port: int
    dragoman: KubeDragomanProcess
    envoy: EnvoyProcess
    backends: dict[str, EchoBackend]

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        return get_json(self.url + path)

    def backend_of(self, path: str) -> str:
        status, data = self.get(path)
        return str(data.get("backend", f"HTTP {status}"))

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy, tail=6000)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("kube-e2e")
    listener_port = free_port()
    web_port = free_port("127.0.0.2")
    api_port = free_port("127.0.0.4")
    backends = {
        "web-1": EchoBackend("web-1", host="127.0.0.2", port=web_port),
        "web-2": EchoBackend("web-2", host="127.0.0.3", port=web_port),
        "api": EchoBackend("api", host="127.0.0.4", port=api_port),
    }
    for backend in backends.values():
        backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a(EXTERNAL_HOST, "127.0.0.4")
    api = KubeApiServer(bookmark_interval=1.0)
    api.apply(gateway_class())
    api.apply(gateway("e2e", listener_port))
    api.apply(service("web", 80, web_port))
    api.apply(endpoint_slice("web", web_port, "127.0.0.2"))
    api.apply(external_service("api", EXTERNAL_HOST, api_port))
    api.apply(
        http_route("e2e", [("/external", "api", api_port), ("/", "web", 80)], parents=("e2e",))
    )
    kubeconfig = api.write_kubeconfig(root / "kubeconfig")
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = KubeDragomanProcess(kubeconfig, xds_address, free_port(), root / "dragoman.log")
    envoy: EnvoyProcess | None = None
    try:
        dragoman.start()
        envoy = start_envoy(root, xds_address, dns.port, node_cluster="default/e2e")
        w = World(
            api, f"http://127.0.0.1:{listener_port}", listener_port, dragoman, envoy, backends
        )
        try:
            wait_until(lambda: w.backend_of("/") == "web-1", timeout=20)
            wait_until(lambda: w.backend_of("/external") == "api", timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed the API server's objects:\n" + w.diagnostics())
        yield w
    finally:
        if envoy is not None:
            envoy.stop()
        dragoman.stop()
        api.close()
        dns.stop()
        for backend in backends.values():
            backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    rejected = rejected_updates(world.envoy)
    assert rejected == {}, world.diagnostics()


def test_routes_to_pods_and_to_the_external_name(world: World) -> None:
    status, data = world.get("/external/x")
    assert status == 200, world.diagnostics()
    assert (data["backend"], data["host"]) == ("api", EXTERNAL_HOST)
    assert world.backend_of("/anything") == "web-1"


def test_the_leader_wrote_the_computed_status(world: World) -> None:
    def programmed() -> bool:
        status = (world.api.get("Gateway", "e2e") or {}).get("status") or {}
        return any(
            c["type"] == "Programmed" and c["status"] == "True"
            for c in status.get("conditions", [])
        )

    wait_until(programmed, timeout=10)
    route = world.api.get("HTTPRoute", "e2e") or {}
    [parent] = route["status"]["parents"]
    assert parent["controllerName"] == "dragoman.dev/gateway-controller"
    lease = world.api.get("leases", "dragoman-leader") or {}
    assert lease["spec"]["holderIdentity"] == "e2e"


def test_endpoint_slice_change_takes_the_fast_path(world: World) -> None:
    world.api.apply(endpoint_slice("web", world.backends["web-1"].port, "127.0.0.2", "127.0.0.3"))
    try:
        wait_until(
            lambda: {world.backend_of("/") for _ in range(10)} == {"web-1", "web-2"}, timeout=10
        )
        assert "endpoints update" in world.dragoman.log()
    finally:
        world.api.apply(endpoint_slice("web", world.backends["web-1"].port, "127.0.0.2"))
    wait_until(lambda: {world.backend_of("/") for _ in range(10)} == {"web-1"}, timeout=10)


def test_a_new_route_is_served_within_seconds(world: World) -> None:
    api_port = world.backends["api"].port
    started = time.monotonic()
    world.api.apply(http_route("extra", [("/added", "api", api_port)], parents=("e2e",)))
    wait_until(lambda: world.backend_of("/added") == "api", timeout=10)
    assert time.monotonic() - started < 5
    world.api.delete("HTTPRoute", "extra")
    wait_until(lambda: world.backend_of("/added") == "web-1", timeout=10)


def test_api_server_outage_keeps_envoy_serving_and_catches_up(world: World) -> None:
    api_port = world.backends["api"].port
    world.api.stop()
    try:
        world.api.apply(http_route("during", [("/during", "api", api_port)], parents=("e2e",)))
        for _ in range(10):  # about two seconds without an API server
            assert world.backend_of("/") == "web-1", world.diagnostics()
            assert world.backend_of("/external") == "api"
            time.sleep(0.2)
        assert world.dragoman.probe("/healthz") == 200
        assert world.dragoman.probe("/readyz") == 200
        assert world.backend_of("/during") == "web-1"  # not seen yet
    finally:
        world.api.start()
    wait_until(lambda: world.backend_of("/during") == "api", timeout=20)
    world.api.delete("HTTPRoute", "during")
    wait_until(lambda: world.backend_of("/during") == "web-1", timeout=10)


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _status_of(url: str) -> int:
    status, _ = get_json(url)
    return status


def test_service_changes_reach_envoy(world: World) -> None:
    """A route to a Service that does not exist yet; the Service appears as an ExternalName,
    becomes pod-backed, and goes away."""
    api_port = world.backends["api"].port
    web_port = world.backends["web-1"].port
    world.api.apply(http_route("moving", [("/moving", "moving", api_port)], parents=("e2e",)))
    try:
        wait_until(lambda: _status_of(world.url + "/moving") >= 500, timeout=10)
        world.api.apply(external_service("moving", EXTERNAL_HOST, api_port))
        wait_until(lambda: world.backend_of("/moving") == "api", timeout=10)
        # Updated in place: now backed by a pod (web-2's address).
        world.api.apply(endpoint_slice("moving", web_port, "127.0.0.3"))
        world.api.apply(service("moving", api_port, web_port))
        wait_until(lambda: world.backend_of("/moving") == "web-2", timeout=10)
        world.api.delete("Service", "moving")
        wait_until(lambda: _status_of(world.url + "/moving") >= 500, timeout=10)
    except TimeoutError:
        pytest.fail("Service change not served:\n" + world.diagnostics())
    finally:
        world.api.delete("HTTPRoute", "moving")
        world.api.delete("EndpointSlice", "moving-1")
        world.api.delete("Service", "moving")
    assert world.backend_of("/") == "web-1"


def test_gateway_changes_reach_envoy(world: World) -> None:
    """The served Gateway gains a listener, loses it, is deleted and comes back."""
    original = world.api.get("Gateway", "e2e") or {}
    port = world.listener_port
    extra_port = free_port()
    changed = gateway("e2e", port)
    changed["spec"]["listeners"].append({"name": "extra", "port": extra_port, "protocol": "HTTP"})
    extra = f"http://127.0.0.1:{extra_port}"
    try:
        world.api.apply(changed)
        wait_until(lambda: backend_of(extra + "/") == "web-1", timeout=10)
        world.api.apply(gateway("e2e", port))
        wait_until(lambda: _refused(extra_port), timeout=10)
        assert world.backend_of("/") == "web-1"
        world.api.delete("Gateway", "e2e")
        wait_until(lambda: _refused(port), timeout=10)
    except TimeoutError:
        pytest.fail("Gateway change not served:\n" + world.diagnostics())
    finally:
        world.api.apply(
            {k: v for k, v in original.items() if k != "status"} or gateway("e2e", port)
        )
    wait_until(lambda: world.backend_of("/") == "web-1", timeout=15)


def test_an_https_listener_follows_its_secret(world: World) -> None:
    """An HTTPS listener whose Secret appears, is rotated and is deleted."""
    ca = certificate_authority("kube e2e CA")
    first, second = ca.issue(TLS_HOST), ca.issue(TLS_HOST)
    https_port = free_port()
    with_https = gateway("e2e", world.listener_port)
    with_https["spec"]["listeners"].append(
        {
            "name": "https",
            "port": https_port,
            "protocol": "HTTPS",
            "tls": {"certificateRefs": [{"name": "e2e-cert"}]},
        }
    )

    def served_certificate() -> bytes:
        context = ssl.create_default_context(cadata=ca.pem.decode())
        raw = socket.create_connection(("127.0.0.1", https_port), timeout=3)
        with context.wrap_socket(raw, server_hostname=TLS_HOST) as tls:
            der = tls.getpeercert(binary_form=True)
            connection = http.client.HTTPConnection("127.0.0.1", https_port, timeout=3)
            connection.sock = tls
            connection.request("GET", "/", headers={"Host": TLS_HOST})
            response = connection.getresponse()
            assert json.loads(response.read())["backend"] == "web-1"
        assert der is not None
        return x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)

    try:
        world.api.apply(with_https)
        # Not served while its Secret is missing, as its status says.
        wait_until(lambda: _listener_condition(world, "https", "ResolvedRefs") == "False")
        assert _refused(https_port)
        world.api.apply(tls_secret("e2e-cert", first.certificate, first.private_key))
        wait_until(lambda: served_certificate() == first.certificate, timeout=10)
        world.api.apply(tls_secret("e2e-cert", second.certificate, second.private_key))  # rotated
        wait_until(lambda: served_certificate() == second.certificate, timeout=10)
        world.api.delete("Secret", "e2e-cert")
        wait_until(lambda: _refused(https_port), timeout=10)
    except TimeoutError:
        pytest.fail("HTTPS listener did not follow its Secret:\n" + world.diagnostics())
    finally:
        world.api.delete("Secret", "e2e-cert")
        world.api.apply(gateway("e2e", world.listener_port))
    assert world.backend_of("/") == "web-1"
    assert "PRIVATE KEY" not in world.dragoman.log()


def _listener_condition(world: World, listener: str, type: str) -> str:
    status = (world.api.get("Gateway", "e2e") or {}).get("status") or {}
    for entry in status.get("listeners", []):
        if entry["name"] == listener:
            return next((c["status"] for c in entry["conditions"] if c["type"] == type), "")
    return ""


def test_the_deployed_envoy_is_ready_only_once_it_has_its_configuration(tmp_path: Path) -> None:
    """deploy/'s bootstrap and readiness probe, with the real Envoy: /ready is refused until
    the first configuration arrives from dragoman, then answers 200."""
    xds_port, ready_port, stats_port = free_port(), free_port(), free_port()
    admin = tmp_path / "admin.sock"
    # Over mutual TLS, as deployed: Envoy with the fleet Secret's files.
    envoy_tls, server_flags = deployed_tls(tmp_path)
    bootstrap = deployed_envoy_bootstrap(xds_port, ready_port, admin, envoy_tls, stats_port)
    envoy = EnvoyProcess(bootstrap, tmp_path, admin, tmp_path / "envoy.log")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    control = DragomanProcess(
        manifests, f"127.0.0.1:{xds_port}", tmp_path / "dragoman.log", extra_args=server_flags
    )
    ready = f"http://127.0.0.1:{ready_port}/ready"
    envoy.start()
    try:
        wait_until(lambda: envoy.stats("server.state") is not None, timeout=10)  # Envoy is up
        for _ in range(5):  # no control plane yet: no configuration, not ready
            assert _refused(ready_port)
            time.sleep(0.2)
        control.start()
        wait_until(lambda: http_get(ready)[0] == 200, timeout=20)
        assert http_get(f"http://127.0.0.1:{ready_port}/elsewhere")[0] == 404
        # The stats listener of deploy/: Prometheus' page, and none of the admin's others.
        stats = f"http://127.0.0.1:{stats_port}"
        status, _, body = http_get(stats + "/stats/prometheus")
        assert status == 200 and b"envoy_server_live" in body
        assert http_get(stats + "/config_dump")[0] == 404
    finally:
        envoy.stop()
        control.stop()
