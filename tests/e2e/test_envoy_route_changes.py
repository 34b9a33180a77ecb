"""Route changes under steady traffic, on every xDS transport: not one request refused.

A rule switched to a backend whose cluster Envoy has not used yet (a backend swapped, a
weight raised from 0, a Service's port renumbered) used to reach Envoy before that cluster
was warm, and Envoy answered `503` (flag NC, cluster not found) meanwhile; per-type, a
cluster also went before the routes naming it were replaced. A route naming a cluster is
sent only once the client has the cluster and its endpoints, and a cluster goes only once
no route names it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsTransport, bootstrap_yaml
from tests.support.builders import (
    backend_ref,
    endpoint_slice,
    external_service,
    gateway,
    http_route,
    match,
    rule,
    service,
    service_port,
    yaml_text,
)
from tests.support.harness import DragomanProcess, free_port, rejected_updates, write_manifest
from tests.support.steady_traffic import Traffic

RATE = 50  # requests per second through each Envoy (four of them: 200 in all)
SETTLE_S = 0.8  # traffic after each change before the next
FAR_HOST = "far.e2e.test"  # an ExternalName Service's: a strict-DNS cluster
PATHS = ("/", "/external/x")  # what the traffic asks for, in turn


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
GATEWAYS = [f"gw-{m.name}" for m in MODES]


Backends = tuple[tuple[str, int, int | None], ...]  # (Service, port, weight)


def moving(ports: Mapping[str, int], blue_port: int, backends: Backends, far_port: int) -> str:
    """blue and green, pod-backed with one unnamed port each (blue's numbered `blue_port`);
    far, an ExternalName Service whose one port, unnamed, is `far_port`; and the route
    "moving": /external to far, the rest to `backends`."""
    documents = [external_service("far", FAR_HOST, far_port)]
    for name, address in (("blue", "127.0.0.2"), ("green", "127.0.0.3")):
        number = blue_port if name == "blue" else 80
        declared = [service_port(number, ports[name])]
        documents += [
            service(name, ports=declared),
            endpoint_slice(name, {"": ports[name]}, address),
        ]
    refs = [backend_ref(name, port, weight=weight) for name, port, weight in backends]
    to_far = rule(backend_ref("far", far_port), matches=[match("/external")])
    documents.append(http_route("moving", rules=[to_far, rule(*refs)], parents=GATEWAYS))
    return yaml_text(*documents)


# (blue's Service port, the rule's backends): each step names a cluster the step before did
# not, so Envoy learns a new cluster together with the route that names it.
STEPS: list[tuple[int, Backends]] = [
    (80, (("green", 80, None),)),  # swapped: blue -> green
    (80, (("blue", 80, None),)),  # and back
    (80, (("blue", 80, 100), ("green", 80, 0))),  # 100/0: green not served
    (80, (("blue", 80, 50), ("green", 80, 50))),  # 50/50: green new again
    (81, (("blue", 81, None),)),  # blue's only port, unnamed, renumbered
    (82, (("blue", 82, 50), ("green", 80, 50))),
    (80, (("green", 80, None),)),
    (83, (("blue", 83, None),)),
]


@dataclass
class World:
    manifests: Path
    dragoman: DragomanProcess
    envoys: dict[str, EnvoyProcess]
    listener_ports: dict[str, int]
    backend_ports: dict[str, int]
    far_ports: tuple[int, int]  # the ExternalName Service's port, in turn

    def write(self, name: str, text: str) -> None:
        write_manifest(self.manifests, name, text)

    def diagnostics(self) -> str:
        parts = [f"--- dragoman log ---\n{self.dragoman.log()[-4000:]}"]
        for name, envoy in self.envoys.items():
            parts.append(f"--- envoy {name} ---\n{envoy.log_tail(2000)}")
        return "\n".join(parts)


def _backend(port: int, path: str) -> str:
    try:
        status, _, body = http_get(f"http://127.0.0.1:{port}{path}")
    except OSError:
        return "error"
    return body.decode(errors="replace") if status == 200 else f"HTTP {status}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("route-changes")
    manifests = root / "manifests"
    manifests.mkdir()
    backend_ports = {"blue": free_port("127.0.0.2"), "green": free_port("127.0.0.3")}
    far_ports = (free_port("127.0.0.4"), free_port("127.0.0.4"))
    listener_ports = {m.name: free_port() for m in MODES}
    gateways = [gateway(f"gw-{m.name}", listener_ports[m.name]) for m in MODES]
    (manifests / "gateways.yaml").write_text(yaml_text(*gateways))
    first = moving(backend_ports, 80, (("blue", 80, None),), far_ports[0])
    (manifests / "moving.yaml").write_text(first)
    backends = [
        EchoBackend("blue", host="127.0.0.2", port=backend_ports["blue"]),
        EchoBackend("green", host="127.0.0.3", port=backend_ports["green"]),
        *(EchoBackend("far", host="127.0.0.4", port=port) for port in far_ports),
    ]
    for backend in backends:
        backend.start()
    dns = DnsResponder()
    dns.start()
    dns.set_a(FAR_HOST, "127.0.0.4")
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifests, xds_address, root / "dragoman.log").start()
    envoys: dict[str, EnvoyProcess] = {}
    try:
        for mode in MODES:
            workdir = root / mode.name
            bootstrap = bootstrap_yaml(
                xds_address,
                node_id=f"envoy-{mode.name}",
                node_cluster=f"default/gw-{mode.name}",
                admin_socket=str(workdir / "admin.sock"),
                dns_resolvers=[f"127.0.0.1:{dns.port}"],
                dns_use_tcp=True,
                xds_transport=mode.transport,
                delta=mode.delta,
            )
            envoy = EnvoyProcess(
                bootstrap, workdir, workdir / "admin.sock", workdir / "envoy.log", concurrency=1
            )
            envoys[mode.name] = envoy.start()
        w = World(manifests, dragoman, envoys, listener_ports, backend_ports, far_ports)
        for mode in MODES:
            port = listener_ports[mode.name]
            try:
                wait_until(lambda p=port: '"blue"' in _backend(p, PATHS[0]), 20)
                wait_until(lambda p=port: '"far"' in _backend(p, PATHS[1]), 20)
            except TimeoutError:
                pytest.fail(f"{mode.name} never routed to blue and far\n" + w.diagnostics())
        yield w
    finally:
        for envoy in envoys.values():
            envoy.stop()
        dragoman.stop()
        dns.stop()
        for backend in backends:
            backend.stop()


def test_route_changes_under_traffic_refuse_no_request(world: World) -> None:
    traffic = {m.name: Traffic(world.listener_ports[m.name], RATE, PATHS) for m in MODES}
    for flow in traffic.values():
        flow.start()
    try:
        time.sleep(SETTLE_S)
        for step, (blue_port, backends) in enumerate(STEPS, 1):
            # far's port renumbered at every step: a new strict-DNS cluster, which warms
            # until its first DNS answer.
            far_port = world.far_ports[step % 2]
            # One file: the route and the Services it names change together.
            text = moving(world.backend_ports, blue_port, backends, far_port)
            world.write("moving.yaml", text)
            time.sleep(SETTLE_S)
    finally:
        for flow in traffic.values():
            flow.finish()
    answers: dict[str, Any] = {name: dict(flow.answers) for name, flow in traffic.items()}
    refused = {
        name: {answer: n for answer, n in counts.items() if answer != "2xx"}
        for name, counts in answers.items()
    }
    # Traffic ran all along (a loaded machine sends fewer than RATE a second).
    least = RATE * SETTLE_S * len(STEPS) / 4
    assert all(counts.get("2xx", 0) > least for counts in answers.values()), answers
    assert refused == {m.name: {} for m in MODES}, f"{answers}\n{world.diagnostics()}"
    rejected = {name: rejected_updates(envoy) for name, envoy in world.envoys.items()}
    assert all(not r for r in rejected.values()), rejected
