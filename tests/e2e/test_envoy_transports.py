"""End to end, every xDS transport: four real Envoys (ADS or per-type, each SotW or delta)
against one `dragoman serve`, each routing real requests to a pod-backed Service and an
ExternalName host, following the same changes, with no update rejected."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from envoy.admin.v3.config_dump_shared_pb2 import ClientResourceStatus

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsTransport, bootstrap_yaml
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE
from dragoman.xds.csds.csds_client import fetch_client_status
from tests.support.builders import (
    backend_ref,
    endpoint_slice,
    external_service,
    gateway,
    http_route,
    match,
    rule,
    service,
    yaml_text,
)
from tests.support.harness import DragomanProcess, free_port, rejected_updates, write_manifest

EXTERNAL_HOST = "api.transports.test"


@dataclass(frozen=True)
class Mode:
    name: str
    transport: XdsTransport
    delta: bool


MODES = (
    Mode("ads", "ads", False),
    Mode("ads-delta", "ads", True),
    Mode("per-type", "per-type", False),
    Mode("per-type-delta", "per-type", True),
)


def services(web_port: int, api_port: int, extra_ready: bool = False) -> str:
    """web's pods: 127.0.0.2, and 127.0.0.3 ready only when told; api: the external host."""
    if extra_ready:
        pods = endpoint_slice("web", web_port, "127.0.0.2", "127.0.0.3")
    else:
        pods = endpoint_slice("web", web_port, "127.0.0.2", not_ready=["127.0.0.3"])
    return yaml_text(
        service("web", 80, web_port), pods, external_service("api", EXTERNAL_HOST, api_port)
    )


EVERY_GATEWAY = [f"gw-{m.name}" for m in MODES]


def routes(api_port: int) -> str:
    to_api = rule(backend_ref("api", api_port), matches=[match("/external")])
    return yaml_text(
        http_route(
            "everywhere", rules=[to_api, rule(backend_ref("web", 80))], parents=EVERY_GATEWAY
        )
    )


def extra_route(extra_port: int) -> str:
    return yaml_text(
        service("extra", 8080, extra_port),
        endpoint_slice("extra", extra_port, "127.0.0.6"),
        http_route("extra", [("/added", "extra", 8080)], parents=EVERY_GATEWAY),
    )


@dataclass
class Proxy:
    mode: Mode
    envoy: EnvoyProcess
    url: str

    def backend_of(self, path: str) -> str:
        try:
            status, _, body = http_get(self.url + path)
        except OSError as error:
            return f"error {error}"
        try:
            return str(json.loads(body).get("backend", f"HTTP {status}"))
        except ValueError:
            return f"HTTP {status}"

    def rejected(self) -> dict[str, int]:
        return rejected_updates(self.envoy)


@dataclass
class World:
    manifests: Path
    dragoman: DragomanProcess
    proxies: dict[str, Proxy]
    web_port: int
    api_port: int
    extra_port: int

    def write(self, name: str, text: str) -> None:
        write_manifest(self.manifests, name, text)

    def diagnostics(self) -> str:
        parts = [f"--- dragoman log ---\n{self.dragoman.log()[-5000:]}"]
        for proxy in self.proxies.values():
            parts.append(f"--- envoy {proxy.mode.name} ---\n{proxy.envoy.log_tail(3000)}")
        return "\n".join(parts)

    def converge(self, path: str, expected: set[str], timeout: float = 20) -> None:
        """Every proxy answers `path` from exactly the `expected` backends."""
        for proxy in self.proxies.values():
            try:
                wait_until(
                    lambda p=proxy: {p.backend_of(path) for _ in range(8)} == expected,
                    timeout=timeout,
                )
            except TimeoutError:
                pytest.fail(
                    f"{proxy.mode.name}: {path} never reached {expected}\n" + self.diagnostics()
                )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("transports")
    manifest_dir = root / "manifests"
    manifest_dir.mkdir()
    web_port = free_port("127.0.0.2")
    api_port = free_port("127.0.0.4")
    extra_port = free_port("127.0.0.6")
    listener_ports = {m.name: free_port() for m in MODES}
    files = {
        "gateways.yaml": yaml_text(
            *(gateway(f"gw-{m.name}", listener_ports[m.name]) for m in MODES)
        ),
        "services.yaml": services(web_port, api_port),
        "routes.yaml": routes(api_port),
    }
    for name, text in files.items():
        (manifest_dir / name).write_text(text)
    backends = [
        EchoBackend("web-ready", host="127.0.0.2", port=web_port),
        EchoBackend("web-other", host="127.0.0.3", port=web_port),
        EchoBackend("api", host="127.0.0.4", port=api_port),
        EchoBackend("extra", host="127.0.0.6", port=extra_port),
    ]
    for backend in backends:
        backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a(EXTERNAL_HOST, "127.0.0.4")
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifest_dir, xds_address, root / "dragoman.log").start()
    proxies: dict[str, Proxy] = {}
    try:
        for mode in MODES:
            workdir = root / mode.name
            workdir.mkdir()
            admin = workdir / "admin.sock"
            bootstrap = bootstrap_yaml(
                xds_address,
                node_id=f"envoy-{mode.name}",
                node_cluster=f"default/gw-{mode.name}",
                admin_socket=str(admin),
                dns_resolvers=[f"127.0.0.1:{dns.port}"],
                dns_use_tcp=True,
                xds_transport=mode.transport,
                delta=mode.delta,
            )
            envoy = EnvoyProcess(bootstrap, workdir, admin, workdir / "envoy.log", concurrency=1)
            envoy.start()
            url = f"http://127.0.0.1:{listener_ports[mode.name]}"
            proxies[mode.name] = Proxy(mode, envoy, url)
        w = World(manifest_dir, dragoman, proxies, web_port, api_port, extra_port)
        w.converge("/", {"web-ready"})
        w.converge("/external", {"api"})
        yield w
    finally:
        for proxy in proxies.values():
            proxy.envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends:
            backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    rejected = {name: p.rejected() for name, p in world.proxies.items() if p.rejected()}
    assert rejected == {}, world.diagnostics()


@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_every_transport_routes_eds_and_external_name(world: World, mode: Mode) -> None:
    proxy = world.proxies[mode.name]
    assert {proxy.backend_of("/") for _ in range(10)} == {"web-ready"}
    status, _, body = http_get(proxy.url + "/external/x")
    assert status == 200
    data = json.loads(body)
    assert data["backend"] == "api" and data["host"] == EXTERNAL_HOST


@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_every_transport_uses_its_own_streams(world: World, mode: Mode) -> None:
    stats = world.proxies[mode.name].envoy.stats()
    ads_connected = stats.get("control_plane.connected_state")
    if mode.transport == "ads":
        assert ads_connected == 1
        assert stats.get("cluster_manager.cds.update_success", 0) >= 1
    else:
        # No ADS stream at all: each type has its own subscription to dragoman.
        assert ads_connected is None
        assert stats.get("cluster_manager.cds.update_success", 0) >= 1
        assert stats.get("listener_manager.lds.update_success", 0) >= 1
    # The log names the stream kind dragoman served this node with.
    log = world.dragoman.log()
    if mode.delta:
        assert f"(delta) connected: node='envoy-{mode.name}'" in log
    else:
        assert f"connected: node='envoy-{mode.name}'" in log


def test_every_transport_converges_to_the_same_configuration(world: World) -> None:
    dumps = {name: sorted(_active_clusters(proxy)) for name, proxy in world.proxies.items()}
    assert len({tuple(v) for v in dumps.values()}) == 1, dumps
    assert any("web" in n for n in dumps["ads"]) and any("api" in n for n in dumps["ads"])
    # Listeners and route configurations too: each Envoy runs, name by name and version by
    # version, what dragoman says (CSDS) it ACKed, and all four run the same configuration
    # but for their own Gateway's name and port.
    served = _served_versions(world)
    shapes = {}
    for name, proxy in world.proxies.items():
        running = {
            LISTENER: _listener_versions(proxy),
            ROUTE: {n: v for n, (v, _) in _route_configs(proxy).items()},
        }
        for type_url, versions in running.items():
            assert versions, (name, type_url)
            assert versions == served[f"envoy-{name}"][type_url], (name, type_url)
        shapes[name] = _normalized(proxy, world)
    assert all(shape == shapes["ads"] for shape in shapes.values()), shapes


def test_endpoint_change_reaches_every_transport(world: World) -> None:
    world.write("services.yaml", services(world.web_port, world.api_port, extra_ready=True))
    try:
        world.converge("/", {"web-ready", "web-other"})
    finally:
        world.write("services.yaml", services(world.web_port, world.api_port))
    world.converge("/", {"web-ready"})


def test_added_then_removed_route_and_cluster_reach_every_transport(world: World) -> None:
    world.write("extra.yaml", extra_route(world.extra_port))
    world.converge("/added", {"extra"})
    for proxy in world.proxies.values():
        assert any("extra" in name for name in _active_clusters(proxy)), proxy.mode.name
    (world.manifests / "extra.yaml").unlink()
    world.converge("/added", {"web-ready"})
    for proxy in world.proxies.values():
        # The removed Service's cluster goes too (after the routes that named it).
        wait_until(lambda p=proxy: not any("extra" in n for n in _active_clusters(p)), timeout=10)
    world.converge("/external", {"api"})


def _active_clusters(proxy: Proxy) -> list[str]:
    clusters = proxy.envoy.config_dump("dynamic_active_clusters")["configs"]
    return [c["cluster"]["name"] for c in clusters]


def _listener_versions(proxy: Proxy) -> dict[str, str]:
    """Active dynamic listeners: name -> the version Envoy took them at."""
    listeners = proxy.envoy.config_dump("dynamic_listeners")["configs"]
    return {
        entry["name"]: entry["active_state"]["version_info"]
        for entry in listeners
        if "active_state" in entry
    }


def _route_configs(proxy: Proxy) -> dict[str, tuple[str, dict[str, Any]]]:
    """Dynamic route configurations: name -> (version, the configuration)."""
    routes = proxy.envoy.config_dump("dynamic_route_configs")["configs"]
    return {
        entry["route_config"]["name"]: (entry["version_info"], entry["route_config"])
        for entry in routes
    }


def _served_versions(world: World) -> dict[str, dict[str, dict[str, str]]]:
    """node -> type -> name -> version dragoman's CSDS reports ACKED."""
    response = fetch_client_status(world.dragoman.xds_address)
    served: dict[str, dict[str, dict[str, str]]] = {}
    for config in response.config:
        by_type = served.setdefault(config.node.id, {LISTENER: {}, ROUTE: {}})
        for entry in config.generic_xds_configs:
            if entry.type_url in by_type:
                assert entry.client_status == ClientResourceStatus.ACKED, entry
                by_type[entry.type_url][entry.name] = entry.version_info
    return served


def _normalized(proxy: Proxy, world: World) -> str:
    """The proxy's route configurations and listener names, its own Gateway's name and port
    replaced by placeholders."""
    port = proxy.url.rsplit(":", 1)[1]
    text = json.dumps(
        {
            "listeners": sorted(_listener_versions(proxy)),
            "routes": {n: config for n, (_, config) in _route_configs(proxy).items()},
        },
        sort_keys=True,
    )
    return text.replace(f"gw-{proxy.mode.name}", "GATEWAY").replace(port, "PORT")


def _not_acked(world: World) -> list[str]:
    """What CSDS reports otherwise than every transport holding all four types, ACKed."""
    response = fetch_client_status(world.dragoman.xds_address)
    by_node = {config.node.id: config for config in response.config}
    wrong = (
        [f"nodes {sorted(by_node)}"] if set(by_node) != {f"envoy-{m.name}" for m in MODES} else []
    )
    for node, config in by_node.items():
        types = {entry.type_url for entry in config.generic_xds_configs}
        if types != {CLUSTER, ENDPOINT, LISTENER, ROUTE}:
            wrong.append(f"{node}: types {sorted(types)}")
        wrong += [
            f"{node}: {entry.name} {ClientResourceStatus.Name(entry.client_status)}"
            for entry in config.generic_xds_configs
            if entry.client_status != ClientResourceStatus.ACKED
        ]
    return wrong


def test_csds_reports_every_transport_acked(world: World) -> None:
    assert _not_acked(world) == []
    # `dragoman clients` shows the same, one row per node and type.
    shown = subprocess.run(
        [sys.executable, "-m", "dragoman", "clients", "--xds-address", world.dragoman.xds_address],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rows = [line.split() for line in shown.splitlines()[1:]]
    assert len(rows) == 4 * 4, shown
    assert all("acked" in row for row in rows), shown


WATCHED = (
    "cluster_manager.cluster_modified",
    "cluster_manager.cluster_added",
    "cluster_manager.cluster_removed",
    "listener_manager.listener_modified",
    "listener_manager.listener_added",
    "listener_manager.listener_removed",
)


def test_restarting_dragoman_changes_nothing_in_any_transport(world: World) -> None:
    # Reconnecting clients say what they hold (SotW: version_info; delta:
    # initial_resource_versions); versions are content hashes, so nothing is rebuilt.
    before = {name: p.envoy.stats() for name, p in world.proxies.items()}
    logged = len(world.dragoman.log())
    world.dragoman.stop()
    world.dragoman.start()

    def everyone_reconnected() -> bool:
        since = world.dragoman.log()[logged:]
        return all(f"connected: node='envoy-{m.name}'" in since for m in MODES)

    wait_until(everyone_reconnected, timeout=30)
    time.sleep(1.5)  # let every type be answered
    world.converge("/", {"web-ready"})
    world.converge("/external", {"api"})
    for name, proxy in world.proxies.items():
        stats = proxy.envoy.stats()
        changed = {k: (before[name].get(k), stats.get(k)) for k in WATCHED}
        assert all(old == new for old, new in changed.values()), (name, changed)
    # Over delta nothing was sent again: what each Envoy named it held is reported ACKed.
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not _not_acked(world), timeout=10)
    assert _not_acked(world) == []
