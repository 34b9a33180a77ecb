"""End to end: with `serve --xds-max-connection-age`, dragoman closes Envoy's xDS connection
after that age; Envoy reconnects and re-applies nothing (the versions it holds are the ones
served: content hashes)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.builders import (
    backend_ref,
    endpoint_slice,
    gateway,
    http_route,
    rule,
    service,
    yaml_text,
)
from tests.support.harness import (
    DragomanProcess,
    backend_of,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)

WATCHED = (
    "cluster_manager.cluster_modified",
    "cluster_manager.cluster_added",
    "cluster_manager.cluster_removed",
    "listener_manager.listener_modified",
    "listener_manager.listener_added",
    "listener_manager.listener_removed",
)
# The age, plus gRPC's jitter (10 %), plus the grace (10 s), plus time to reconnect.
RECONNECT_WITHIN_S = 30


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, EnvoyProcess]]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    web_port = free_port("127.0.0.2")
    listener_port = free_port()
    (manifests / "all.yaml").write_text(
        yaml_text(
            gateway("e2e", listener_port),
            service("web", 80, web_port),
            endpoint_slice("web", web_port, "127.0.0.2"),
            http_route("web", rules=[rule(backend_ref("web", 80))], parents=["e2e"]),
        )
    )
    backend = EchoBackend("web", host="127.0.0.2", port=web_port)
    backend.start()
    dns = DnsResponder()
    dns.start()
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifests,
        xds_address,
        tmp_path / "dragoman.log",
        ("--xds-max-connection-age", "2s"),
    ).start()
    envoy = start_envoy(tmp_path, xds_address, dns.port, delta=request.param)
    url = f"http://127.0.0.1:{listener_port}/"
    try:
        try:
            wait_until(lambda: backend_of(url) == "web", timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed:\n" + diagnostics(dragoman.log(), envoy))
        yield url, envoy
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        backend.stop()


@pytest.mark.parametrize("world", [False, True], ids=["sotw", "delta"], indirect=True)
def test_a_connection_closed_for_its_age_reconnects_and_changes_nothing(
    world: tuple[str, EnvoyProcess],
) -> None:
    url, envoy = world
    connections = "cluster.dragoman-xds.upstream_cx_total"
    before = envoy.stats()
    deadline = time.monotonic() + RECONNECT_WITHIN_S
    while envoy.stat(connections) == before[connections]:
        assert time.monotonic() < deadline, "the xDS connection was never closed for its age"
        assert backend_of(url) == "web"
        time.sleep(0.2)
    wait_until(lambda: envoy.stat("control_plane.connected_state") == 1, timeout=10)
    time.sleep(1.5)  # the new stream answered every type
    after = envoy.stats()
    assert {k: after.get(k) for k in WATCHED} == {k: before.get(k) for k in WATCHED}
    assert not rejected_updates(envoy)
    assert backend_of(url) == "web"
