"""A Gateway with a route table per hostname (dragoman.dev/route-tables: per-host) through a
real Envoy, over ADS and per-type streams, SotW and delta: every hostname answered through its
own scope, with or without a port in the Host; a route added while traffic flows to another
host loses no request; a route removed answers 404; a route switched to a backend whose
cluster is new answers no 503 (the cluster warms before the scope naming it is sent)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dragoman.dag.frontends.route_tables import PER_HOST, ROUTE_TABLES
from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsTransport
from tests.support.builders import endpoint_slice, gateway, http_route, service, yaml_text
from tests.support.harness import (
    DragomanProcess,
    backend_of,
    free_port,
    rejected_updates,
    start_envoy,
    write_manifest,
)
from tests.support.steady_traffic import Traffic

RATE = 50  # requests a second through each Envoy
SETTLE_S = 1.0  # traffic after each change
HOST_A, HOST_B = "a.scopes.test", "b.scopes.test"


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


@dataclass
class World:
    manifests: Path
    dragoman: DragomanProcess
    envoys: dict[str, EnvoyProcess]
    ports: dict[str, int]  # each mode's Gateway listener port
    backend_ports: dict[str, int]

    def routes(self, *routes: tuple[str, str, str]) -> None:
        """Serve exactly these routes: (name, hostname, backend Service)."""
        documents = [
            http_route(name, to, 80, hostnames=[host], parents=[f"gw-{m.name}" for m in MODES])
            for name, host, to in routes
        ]
        write_manifest(self.manifests, "routes.yaml", yaml_text(*documents))

    def diagnostics(self) -> str:
        parts = [f"--- dragoman log ---\n{self.dragoman.log()[-4000:]}"]
        parts += [f"--- envoy {n} ---\n{e.log_tail(2000)}" for n, e in self.envoys.items()]
        return "\n".join(parts)


def annotated_gateway(name: str, port: int) -> dict[str, Any]:
    found = gateway(name, port)
    found["metadata"]["annotations"] = {ROUTE_TABLES: PER_HOST}
    return found


def answer(port: int, host: str) -> str:
    try:
        return backend_of(f"http://127.0.0.1:{port}/", host=host)
    except OSError:
        return "error"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("route-scopes")
    manifests = root / "manifests"
    manifests.mkdir()
    backend_ports = {"blue": free_port("127.0.0.2"), "green": free_port("127.0.0.3")}
    ports = {m.name: free_port() for m in MODES}
    documents = [annotated_gateway(f"gw-{m.name}", ports[m.name]) for m in MODES]
    for name, address in (("blue", "127.0.0.2"), ("green", "127.0.0.3")):
        documents += [
            service(name, 80, backend_ports[name]),
            endpoint_slice(name, {"http": backend_ports[name]}, address),
        ]
    (manifests / "world.yaml").write_text(yaml_text(*documents))
    backends = [
        EchoBackend(name, host=address, port=backend_ports[name])
        for name, address in (("blue", "127.0.0.2"), ("green", "127.0.0.3"))
    ]
    for backend in backends:
        backend.start()
    dns = DnsResponder()
    dns.start()
    xds_address = f"127.0.0.1:{free_port()}"
    envoys: dict[str, EnvoyProcess] = {}
    dragoman = DragomanProcess(manifests, xds_address, root / "dragoman.log")
    w = World(manifests, dragoman, envoys, ports, backend_ports)
    w.routes(("a", HOST_A, "blue"))
    try:
        dragoman.start()
        for mode in MODES:
            envoys[mode.name] = start_envoy(
                root / mode.name,
                xds_address,
                dns.port,
                f"default/gw-{mode.name}",
                delta=mode.delta,
                xds_transport=mode.transport,
            )
        for mode in MODES:
            try:
                wait_until(lambda p=ports[mode.name]: answer(p, HOST_A) == "blue", 20)
            except TimeoutError:
                pytest.fail(f"{mode.name} never routed {HOST_A}\n{w.diagnostics()}")
        yield w
    finally:
        for envoy in envoys.values():
            envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends:
            backend.stop()


@pytest.mark.parametrize("mode", [m.name for m in MODES])
def test_envoy_takes_scopes_and_answers_by_host(world: World, mode: str) -> None:
    port = world.ports[mode]
    config = world.envoys[mode].config_dump()
    assert "ScopedRoutesConfigDump" in str(config), "the listener is not scoped"
    assert answer(port, HOST_A) == "blue"
    assert answer(port, f"{HOST_A}:{port}") == "blue"  # the port is dropped from the key
    # Hosts no scope has, and a Host in upper case (keys are case-sensitive): 404.
    assert answer(port, "unknown.scopes.test") == "HTTP 404"
    assert answer(port, HOST_A.upper()) == "HTTP 404"
    assert rejected_updates(world.envoys[mode]) == {}


def test_route_changes_lose_no_request_and_removals_answer_404(world: World) -> None:
    traffic = {m.name: Traffic(world.ports[m.name], RATE, ("/",), host=HOST_A) for m in MODES}
    for flow in traffic.values():
        flow.start()
    try:
        time.sleep(SETTLE_S)
        # A new hostname while traffic flows to another: its own scope, nothing else moves.
        world.routes(("a", HOST_A, "blue"), ("b", HOST_B, "blue"))
        for mode in MODES:
            port = world.ports[mode.name]
            wait_until(lambda p=port: answer(p, HOST_B) == "blue", 20)
        time.sleep(SETTLE_S)
        # Removed: its scope goes, the host answers 404.
        world.routes(("a", HOST_A, "blue"))
        for mode in MODES:
            port = world.ports[mode.name]
            wait_until(lambda p=port: answer(p, HOST_B) == "HTTP 404", 20)
        time.sleep(SETTLE_S)
        # Switched to green, whose cluster no route named before: no 503 while it warms.
        world.routes(("a", HOST_A, "green"))
        for mode in MODES:
            port = world.ports[mode.name]
            wait_until(lambda p=port: answer(p, HOST_A) == "green", 20)
        time.sleep(SETTLE_S)
    except TimeoutError:
        pytest.fail(f"a change never reached Envoy\n{world.diagnostics()}")
    finally:
        for flow in traffic.values():
            flow.finish()
    answers = {name: dict(flow.answers) for name, flow in traffic.items()}
    least = RATE * SETTLE_S  # a loaded machine sends fewer than RATE a second
    assert all(counts.get("2xx", 0) > least for counts in answers.values()), answers
    refused = {name: {k: n for k, n in c.items() if k != "2xx"} for name, c in answers.items()}
    assert refused == {m.name: {} for m in MODES}, f"{answers}\n{world.diagnostics()}"
    rejected = {name: rejected_updates(envoy) for name, envoy in world.envoys.items()}
    assert all(not r for r in rejected.values()), rejected
