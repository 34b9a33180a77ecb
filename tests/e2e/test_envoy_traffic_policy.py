"""End to end: XBackendTrafficPolicies served to a real Envoy fed by `dragoman serve`, proven
against backends on loopback. A retry budget (20%, at least 1 retry at once) caps the retries
of `retry: {attempts: 5}` against a failing backend where the same route without the budget
retries every request 5 times, also when a BackendPolicy on the same Service allows 1,000
parallel retries (the budget wins); a session cookie keeps a client on one of two endpoints
that round robin otherwise, and so does a session header the client sends back. Every request
is counted."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import (
    backend_policy,
    backend_ref,
    endpoint_slice,
    gateway,
    http_route,
    match,
    rule,
    service,
    xbackend_traffic_policy,
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

FAILING_HOST = "127.0.0.2"
STICKY_HOSTS = ("127.0.0.4", "127.0.0.5")
CONCURRENT = 10
ATTEMPTS = 5
MANY_RETRIES = {"circuitBreaker": {"maxParallelRetries": 1000}}


@dataclass
class World:
    url: str
    envoy: EnvoyProcess
    dragoman: DragomanProcess
    failing: PolicyBackend
    sticky: list[PolicyBackend]


def get(
    url: str, path: str, cookie: str | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str, dict[str, str]]:
    """(status, body, headers) of a GET on a connection of its own."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=15)
    sent = dict(headers or {})
    if cookie:
        sent["Cookie"] = cookie
    try:
        connection.request("GET", path, headers=sent)
        response = connection.getresponse()
        body = response.read().decode()
        return response.status, body, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def retried(path: str, backend: str) -> dict[str, object]:
    found = rule(backend_ref(backend, 80), matches=[match(path)])
    return {**found, "retry": {"attempts": ATTEMPTS, "codes": [503]}}


def manifests(listener: int, failing_port: int, sticky_port: int) -> str:
    budget = {
        "retryConstraint": {
            "budget": {"percent": 20, "interval": "10s"},
            "minRetryRate": {"count": 1, "interval": "1s"},
        }
    }
    return yaml_text(
        gateway("e2e", listener),
        # One failing backend behind three Services: no budget, a budget, and a budget beside
        # a BackendPolicy whose circuit breaker would allow 1,000 parallel retries.
        *(
            document
            for name in ("unbudgeted", "budgeted", "both")
            for document in (
                service(name, 80, failing_port),
                endpoint_slice(name, failing_port, FAILING_HOST),
            )
        ),
        backend_policy("unbudgeted-retries", "unbudgeted", spec=MANY_RETRIES),
        backend_policy("both-retries", "both", spec=MANY_RETRIES),
        xbackend_traffic_policy("budget", "budgeted", "both", spec=budget),
        http_route(
            "retries",
            rules=[retried(f"/{name}", name) for name in ("unbudgeted", "budgeted", "both")],
            parents=["e2e"],
        ),
        # Two endpoints, reached with and without session persistence.
        *(
            document
            for name in ("sticky", "loose", "by-header")
            for document in (
                service(name, 80, sticky_port),
                endpoint_slice(name, sticky_port, *STICKY_HOSTS),
            )
        ),
        xbackend_traffic_policy(
            "keep", "sticky", spec={"sessionPersistence": {"sessionName": "pin"}}
        ),
        xbackend_traffic_policy(
            "keep-by-header",
            "by-header",
            spec={"sessionPersistence": {"type": "Header", "sessionName": "x-pin"}},
        ),
        http_route("sticky", [("/sticky", "sticky", 80)], parents=["e2e"]),
        http_route("by-header", [("/by-header", "by-header", 80)], parents=["e2e"]),
        http_route("loose", [("/loose", "loose", 80)], parents=["e2e"]),
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("traffic-policy")
    failing_port = free_port(FAILING_HOST)
    sticky_port = free_port(STICKY_HOSTS[0])
    failing = PolicyBackend("failing", FAILING_HOST, failing_port)
    failing.behaviour.failing = True
    # Slow enough that the concurrent requests are all active at once.
    failing.behaviour.delay_s = 0.3
    sticky = [PolicyBackend(f"sticky-{i}", h, sticky_port) for i, h in enumerate(STICKY_HOSTS)]
    started: list[PolicyBackend] = []
    dns = DnsResponder().start()
    dragoman = envoy = None
    try:
        for backend in (failing, *sticky):
            started.append(backend.start())
        directory = root / "manifests"
        directory.mkdir()
        listener = free_port()
        (directory / "all.yaml").write_text(manifests(listener, failing_port, sticky_port))
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(directory, xds, root / "dragoman.log").start()
        envoy = start_envoy(root, xds, dns.port)
        url = f"http://127.0.0.1:{listener}"
        try:
            wait_until(lambda: get(url, "/loose")[0] == 200, timeout=30)
        except TimeoutError:
            pytest.fail("Envoy never routed:\n" + diagnostics(dragoman.log(), envoy))
        yield World(url, envoy, dragoman, failing, sticky)
        assert not rejected_updates(envoy)
    finally:
        if envoy is not None:
            envoy.stop()
        if dragoman is not None:
            dragoman.stop()
        dns.stop()
        for backend in started:
            backend.stop()


def burst(world: World, path: str) -> tuple[list[int], int]:
    """CONCURRENT requests at once: every status the clients saw, and how many attempts
    reached the backend."""
    before = len(world.failing.requests_to(path))
    statuses: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        status, _, _ = get(world.url, path)
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=one) for _ in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return statuses, len(world.failing.requests_to(path)) - before


def overflow(world: World, service: str) -> int:
    return world.envoy.stat(f"cluster.default/{service}/80.upstream_rq_retry_overflow", 0)


def test_a_retry_budget_caps_retries_to_a_failing_backend(world: World) -> None:
    statuses, attempts = burst(world, "/unbudgeted")
    # Every request answered (503 after its last attempt), each tried 1 + 5 times.
    assert statuses == [503] * CONCURRENT
    assert attempts == CONCURRENT * (1 + ATTEMPTS)
    assert overflow(world, "unbudgeted") == 0

    statuses, attempts = burst(world, "/budgeted")
    assert statuses == [503] * CONCURRENT  # none lost: the over-budget ones fail fast
    # 20% of 10 active requests is 2 retries at once: most retries are refused.
    assert overflow(world, "budgeted") > 0
    assert CONCURRENT <= attempts <= CONCURRENT * (1 + ATTEMPTS) // 2, attempts


def test_the_budget_wins_over_a_backend_policys_parallel_retries(world: World) -> None:
    statuses, attempts = burst(world, "/both")
    assert statuses == [503] * CONCURRENT
    assert overflow(world, "both") > 0
    assert attempts <= CONCURRENT * (1 + ATTEMPTS) // 2, attempts


def test_a_session_cookie_keeps_a_client_on_one_endpoint(world: World) -> None:
    # Without persistence, the two endpoints share the requests.
    loose = {get(world.url, "/loose")[1] for _ in range(20)}
    assert len(loose) == 2, loose

    status, first, headers = get(world.url, "/sticky")
    assert status == 200
    cookie = headers.get("set-cookie", "")
    assert cookie.startswith("pin="), headers
    assert "max-age" not in cookie.lower()  # lifetimeType Session: a session cookie
    pinned = cookie.split(";", 1)[0]
    answers = [get(world.url, "/sticky", cookie=pinned) for _ in range(20)]
    assert [a[0] for a in answers] == [200] * 20
    assert {a[1] for a in answers} == {first}
    # A new client (no cookie) is balanced, and given a cookie of its own.
    fresh = {get(world.url, "/sticky")[1] for _ in range(20)}
    assert len(fresh) == 2, fresh


def test_a_session_header_sent_back_keeps_a_client_on_one_endpoint(world: World) -> None:
    status, first, headers = get(world.url, "/by-header")
    assert status == 200
    pin = headers.get("x-pin")
    assert pin, headers
    answers = [get(world.url, "/by-header", headers={"x-pin": pin}) for _ in range(20)]
    assert [a[0] for a in answers] == [200] * 20
    assert {a[1] for a in answers} == {first}
    # Without the header, both endpoints answer.
    assert len({get(world.url, "/by-header")[1] for _ in range(20)}) == 2
