"""End to end: one endpoint of four flaps (healthy a second, then failing a second: answering
503, or its port closed) under steady traffic through 50 routes and a real Envoy. With a
BackendPolicy's outlier detection and the routes' `retry` (attempts 2) the client sees no
failure: the retry hides the requests that find the failing endpoint, and the ejection, learnt
once for the Service however many routes reach it, keeps most of them away. The same for a
pod-backed Service and for an ExternalName whose name the test's DNS responder resolves to the
four addresses. Every request is counted."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import (
    backend_policy,
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
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
)
from tests.support.policy_backends import PolicyBackend, flapping

pytestmark = pytest.mark.timeout(180)

POOL_HOSTS = ("127.0.0.41", "127.0.0.42", "127.0.0.43", "127.0.0.44")  # the last one flaps
POOL_NAME = "pool.e2e.test"
ROUTES = 50
PERIOD_S = 1.0
TRAFFIC_S = 5.0  # two and a half flaps
RETRY = {"attempts": 2, "codes": [503]}
PASSIVE = {
    "consecutive5XxErrors": 3,
    "consecutiveGatewayErrors": 3,
    "consecutiveLocalOriginFailures": 3,
    "splitExternalLocalOriginErrors": True,
    "interval": "1s",
    "baseEjectionTime": "1s",
    "maxEjectionPercent": 50,
}


@dataclass
class World:
    listener: int
    envoy: EnvoyProcess
    dragoman: DragomanProcess
    pool: list[PolicyBackend]


def routes_to(backend: str, prefix: str, port: int) -> list[dict[str, object]]:
    """`ROUTES` HTTPRoutes, `/<prefix><i>` each, to `backend` with retries."""
    found = []
    for i in range(ROUTES):
        sent = rule(backend_ref(backend, port), matches=[match(f"/{prefix}{i}")])
        sent["retry"] = RETRY
        found.append(http_route(f"{prefix}{i}", rules=[sent], parents=["e2e"]))
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("flapping")
    port = free_port(POOL_HOSTS[0])
    pool = [PolicyBackend(f"pool-{i}", host, port) for i, host in enumerate(POOL_HOSTS)]
    started: list[PolicyBackend] = []
    dns = DnsResponder().start()
    dragoman = envoy = None
    try:
        for backend in pool:
            started.append(backend.start())
        dns.set_a(POOL_NAME, *POOL_HOSTS)
        listener = free_port()
        manifests = root / "manifests"
        manifests.mkdir()
        (manifests / "all.yaml").write_text(
            yaml_text(
                gateway("e2e", listener),
                service("pool", 80, port),
                endpoint_slice("pool", port, *POOL_HOSTS),
                external_service("external-pool", POOL_NAME, port),
                backend_policy(
                    "eject", "pool", "external-pool", spec={"healthCheck": {"passive": PASSIVE}}
                ),
                *routes_to("pool", "p", 80),
                *routes_to("external-pool", "x", port),
            )
        )
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(manifests, xds, root / "dragoman.log").start()
        envoy = start_envoy(root, xds, dns.port)
        w = World(listener, envoy, dragoman, pool)
        try:
            for prefix in ("p", "x"):
                wait_until(partial(all_answer, w, prefix), timeout=60)
        except TimeoutError:
            pytest.fail("Envoy never routed:\n" + diagnostics(dragoman.log(), envoy))
        yield w
        assert not rejected_updates(envoy)
    finally:
        if envoy is not None:
            envoy.stop()
        if dragoman is not None:
            dragoman.stop()
        dns.stop()
        for backend in started:
            backend.stop()


def all_answer(world: World, prefix: str) -> bool:
    """Every route answers 200 and every endpoint answered one of them."""
    before = [backend.seen.requests for backend in world.pool]
    statuses, _ = traffic(world, prefix, seconds=None, count=ROUTES)
    reached = all(backend.seen.requests > b for backend, b in zip(world.pool, before, strict=True))
    return statuses == [200] * ROUTES and reached


def traffic(
    world: World, prefix: str, seconds: float | None, count: int = 10_000
) -> tuple[list[int], int]:
    """Requests one after another on a keep-alive connection, each to the next route, for
    `seconds` (or `count` requests): every status (0: no answer) and the connections opened."""
    statuses: list[int] = []
    connections = 0
    connection: http.client.HTTPConnection | None = None
    ends = time.monotonic() + (seconds or 60)
    while len(statuses) < count and time.monotonic() < ends:
        if connection is None:
            connection = http.client.HTTPConnection("127.0.0.1", world.listener, timeout=10)
            connections += 1
        try:
            connection.request("GET", f"/{prefix}{len(statuses) % ROUTES}")
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
        except (OSError, http.client.HTTPException):
            statuses.append(0)
            connection.close()
            connection = None
        time.sleep(0.005)
    if connection is not None:
        connection.close()
    return statuses, connections


def retries_and_ejections(envoy: EnvoyProcess) -> tuple[int, int]:
    stats = envoy.stats(r"upstream_rq_retry$|outlier_detection\.ejections_enforced_total")
    retries = sum(v for k, v in stats.items() if k.endswith("upstream_rq_retry"))
    ejections = sum(v for k, v in stats.items() if k.endswith("ejections_enforced_total"))
    return retries, ejections


@pytest.mark.parametrize("how", ["503", "refused"])
@pytest.mark.parametrize("prefix", ["p", "x"], ids=["pod-backed", "external-name"])
def test_passive_health_and_retry_hide_a_flapping_endpoint_of_four(
    world: World, prefix: str, how: str
) -> None:
    flapper = world.pool[-1]
    retries_before, ejections_before = retries_and_ejections(world.envoy)
    answered_before = flapper.seen.requests
    with flapping(flapper, how, PERIOD_S) as flaps:
        statuses, _ = traffic(world, prefix, TRAFFIC_S)
    retries, ejections = retries_and_ejections(world.envoy)

    assert len(flaps.failed_at) >= 2, flaps  # it did flap, twice at least
    assert len(statuses) >= 100, len(statuses)
    failed = [s for s in statuses if s != 200]
    assert failed == [], f"{len(failed)} of {len(statuses)} failed: {set(failed)}"
    # The failures were there to hide: requests found the failing endpoint and were retried,
    # and it was ejected; while healthy it kept answering its share.
    assert retries > retries_before
    assert ejections > ejections_before
    assert flapper.seen.requests > answered_before
