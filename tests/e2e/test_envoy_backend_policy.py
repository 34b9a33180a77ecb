"""End to end: BackendPolicies served to a real Envoy, proven against backends on loopback
that misbehave on demand. A circuit breaker turns excess concurrent requests into fast 503s
(response flag UO); an idle timeout below a backend's own ends the keep-alive race that
fails requests without it; outlier detection ejects the one failing endpoint of four; an
active HTTP health check reaches an ExternalName with the external name as Host, without
traffic. Every request is counted."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import (
    backend_policy,
    endpoint_slice,
    external_service,
    gateway,
    http_route,
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
from tests.support.policy_backends import PolicyBackend

pytestmark = pytest.mark.timeout(180)

POOL_HOSTS = ("127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7")
PARTNER = "partner.e2e.test"


@dataclass
class World:
    url: str
    envoy: EnvoyProcess
    dragoman: DragomanProcess
    slow: PolicyBackend
    racy: PolicyBackend
    pool: list[PolicyBackend]
    partner: PolicyBackend


def request(url: str, path: str) -> tuple[int, float, dict[str, str]]:
    """(status, seconds, response headers) of a GET on a connection of its own."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    started = time.monotonic()
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status, time.monotonic() - started, dict(response.getheaders())
    finally:
        connection.close()


def manifests(listener: int, ports: dict[str, int]) -> str:
    routes = {
        "/slow": ("slow", 80),
        "/racy": ("racy", 80),
        "/fresh": ("fresh", 80),
        "/open-pool": ("open-pool", 80),
        "/guarded-pool": ("guarded-pool", 80),
        "/partner": ("partner", ports["partner"]),
    }
    return yaml_text(
        gateway("e2e", listener),
        service("slow", 80, ports["slow"]),
        endpoint_slice("slow", ports["slow"], "127.0.0.2"),
        backend_policy(
            "slow-limits",
            "slow",
            spec={
                "circuitBreaker": {
                    "maxConnections": 1,
                    "maxPendingRequests": 1,
                    "maxParallelRequests": 1,
                }
            },
        ),
        # One backend that closes connections idle 300 ms, reached without and with a policy.
        service("racy", 80, ports["racy"]),
        endpoint_slice("racy", ports["racy"], "127.0.0.3"),
        service("fresh", 80, ports["racy"]),
        endpoint_slice("fresh", ports["racy"], "127.0.0.3"),
        backend_policy(
            "fresh-connections",
            "fresh",
            spec={"timeout": {"http": {"connectionIdleTimeout": "100ms"}}},
        ),
        # Four endpoints, one of them failing, reached without and with outlier detection.
        service("open-pool", 80, ports["pool"]),
        endpoint_slice("open-pool", ports["pool"], *POOL_HOSTS),
        service("guarded-pool", 80, ports["pool"]),
        endpoint_slice("guarded-pool", ports["pool"], *POOL_HOSTS),
        backend_policy(
            "eject-failing",
            "guarded-pool",
            spec={
                "healthCheck": {
                    "passive": {
                        "consecutive5XxErrors": 3,
                        "interval": "1s",
                        "baseEjectionTime": "2m",
                        "maxEjectionPercent": 50,
                    }
                }
            },
        ),
        external_service("partner", PARTNER, ports["partner"]),
        backend_policy(
            "partner-health",
            "partner",
            spec={
                "healthCheck": {
                    "active": {"type": "HTTP", "interval": "500ms", "http": {"path": "/healthz"}}
                }
            },
        ),
        *(
            http_route(name.strip("/"), [(path, backend, port)], parents=["e2e"])
            for path, (backend, port) in routes.items()
            for name in [path]
        ),
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("backend-policy")
    pool_port = free_port(POOL_HOSTS[0])
    ports = {
        "slow": free_port("127.0.0.2"),
        "racy": free_port("127.0.0.3"),
        "pool": pool_port,
        "partner": free_port("127.0.0.8"),
    }
    slow = PolicyBackend("slow", "127.0.0.2", ports["slow"])
    racy = PolicyBackend("racy", "127.0.0.3", ports["racy"])
    pool = [PolicyBackend(f"pool-{i}", host, pool_port) for i, host in enumerate(POOL_HOSTS)]
    partner = PolicyBackend("partner", "127.0.0.8", ports["partner"])
    backends = [slow, racy, *pool, partner]
    started: list[PolicyBackend] = []
    dns = DnsResponder().start()
    dragoman = envoy = None
    try:
        for backend in backends:
            started.append(backend.start())
        dns.set_a(PARTNER, "127.0.0.8")
        directory = root / "manifests"
        directory.mkdir()
        listener = free_port()
        (directory / "all.yaml").write_text(manifests(listener, ports))
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(directory, xds, root / "dragoman.log").start()
        envoy = start_envoy(root, xds, dns.port)
        url = f"http://127.0.0.1:{listener}"
        try:
            wait_until(lambda: request(url, "/open-pool")[0] in (200, 503), timeout=30)
        except TimeoutError:
            pytest.fail("Envoy never routed:\n" + diagnostics(dragoman.log(), envoy))
        yield World(url, envoy, dragoman, slow, racy, pool, partner)
        assert not rejected_updates(envoy)
    finally:
        if envoy is not None:
            envoy.stop()
        if dragoman is not None:
            dragoman.stop()
        dns.stop()
        for backend in started:
            backend.stop()


def access_log(envoy: EnvoyProcess, path: str) -> list[dict[str, object]]:
    entries = []
    for line in Path(envoy.log_path).read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{path}' in line:
            entries.append(json.loads(line))
    return entries


def test_a_circuit_breaker_turns_excess_concurrent_requests_into_fast_503s(world: World) -> None:
    world.slow.behaviour.delay_s = 1.0
    outcomes: list[tuple[int, float, dict[str, str]]] = []
    lock = threading.Lock()

    def one() -> None:
        outcome = request(world.url, "/slow")
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(outcomes) == 8  # every request answered
    answered = [o for o in outcomes if o[0] == 200]
    overflowed = [o for o in outcomes if o[0] == 503]
    assert len(answered) + len(overflowed) == 8, outcomes
    # One in flight and one pending at most: the rest refused at once, not after the 1 s.
    assert len(overflowed) >= 4 and answered, outcomes
    assert all(seconds < 0.5 for _, seconds, _ in overflowed), outcomes
    assert all(headers.get("x-envoy-overloaded") == "true" for *_, headers in overflowed)

    def flags() -> list[object] | None:
        found = [e["response_flags"] for e in access_log(world.envoy, "/slow")]
        return found if len(found) >= 8 else None

    logged = wait_until(flags, timeout=10)
    assert logged.count("UO") == len(overflowed), logged


def test_an_idle_timeout_below_the_backends_ends_the_keep_alive_race(world: World) -> None:
    """The backend closes a connection idle 300 ms as the next request arrives; requests
    0.5 s apart fail on a reused connection, unless Envoy closes it after 100 ms first."""
    world.racy.behaviour.idle_close_s = 0.3

    def statuses(path: str) -> list[int]:
        found = []
        for _ in range(6):
            found.append(request(world.url, path)[0])
            time.sleep(0.5)
        return found

    without = statuses("/racy")
    guarded = statuses("/fresh")

    assert len(without) == len(guarded) == 6
    assert without.count(503) >= 2, without  # the race, lost
    assert guarded == [200] * 6, guarded  # never lost
    assert world.racy.seen.dropped >= without.count(503)


def test_outlier_detection_ejects_the_failing_endpoint_of_four(world: World) -> None:
    failing = world.pool[0]
    failing.behaviour.failing = True
    count = 120

    def run(path: str) -> tuple[int, int]:
        """(requests the failing endpoint got, client errors), every request answered."""
        before = failing.seen.requests
        statuses = [request(world.url, path)[0] for _ in range(count)]
        assert len(statuses) == count and set(statuses) <= {200, 503}, statuses
        return failing.seen.requests - before, statuses.count(503)

    open_hits, open_errors = run("/open-pool")
    guarded_hits, guarded_errors = run("/guarded-pool")

    # Round robin sends the failing endpoint a quarter of the requests without a policy.
    assert open_hits >= count // 4 - 4 and open_errors == open_hits
    # Ejected after 3 consecutive 5xx: at least 80 % fewer requests reach it.
    assert guarded_hits <= 4 and guarded_hits <= open_hits * 0.2, (guarded_hits, open_hits)
    assert guarded_errors == guarded_hits


def test_an_active_health_check_reaches_an_external_name_with_its_name_as_host(
    world: World,
) -> None:
    # No request is sent: a host without traffic is checked at the policy's interval.
    hosts = wait_until(lambda: world.partner.requests_to("/healthz")[:2] or None, timeout=15)
    assert hosts == [PARTNER, PARTNER]
    assert not world.partner.requests_to("/partner")
