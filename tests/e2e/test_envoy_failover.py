"""End to end: an external primary (an ExternalName resolved through the test's DNS
responder) with a BackendPolicy `failover` to an external secondary, behind a real Envoy.
The primary starts failing: its active health check sees it and the secondary takes the
traffic; the primary recovers and gets it back. Every request is counted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from tests.support.builders import (
    backend_policy,
    external_service,
    gateway,
    http_route,
    yaml_text,
)
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
)
from tests.support.policy_backends import PolicyBackend

pytestmark = pytest.mark.timeout(120)

PRIMARY, SECONDARY = "primary.e2e.test", "secondary.e2e.test"
PRIMARY_IP, SECONDARY_IP = "127.0.0.10", "127.0.0.11"
CHECK = {"type": "HTTP", "interval": "250ms", "unhealthyThreshold": 2, "http": {"path": "/hc"}}
# Two failed checks 250 ms apart, and Envoy's own reaction: the issue asks for 2 s.
FAILOVER_WITHIN_S = 2.0


@dataclass
class World:
    url: str
    primary: PolicyBackend
    secondary: PolicyBackend
    envoy: EnvoyProcess
    dragoman: DragomanProcess

    def answered_by(self) -> str:
        """The backend that answered 200, or `HTTP <status>`."""
        status, data = get_json(self.url + "/partner")
        return str(data.get("backend")) if status == 200 else f"HTTP {status}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("failover")
    port = free_port(PRIMARY_IP)
    primary = PolicyBackend("primary", PRIMARY_IP, port).start()
    secondary = PolicyBackend("secondary", SECONDARY_IP, port).start()
    dns = DnsResponder().start()
    dragoman = envoy = None
    try:
        dns.set_a(PRIMARY, PRIMARY_IP)
        dns.set_a(SECONDARY, SECONDARY_IP)
        listener = free_port()
        manifests = root / "manifests"
        manifests.mkdir()
        (manifests / "all.yaml").write_text(
            yaml_text(
                gateway("e2e", listener),
                external_service("primary", PRIMARY, port),
                external_service("secondary", SECONDARY, port),
                backend_policy(
                    "primary",
                    "primary",
                    spec={"healthCheck": {"active": CHECK}, "failover": [{"name": "secondary"}]},
                ),
                backend_policy("secondary", "secondary", spec={"healthCheck": {"active": CHECK}}),
                http_route("partner", [("/partner", "primary", port)], parents=["e2e"]),
            )
        )
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(manifests, xds, root / "dragoman.log").start()
        envoy = start_envoy(root, xds, dns.port)
        w = World(f"http://127.0.0.1:{listener}", primary, secondary, envoy, dragoman)
        try:
            wait_until(lambda: w.answered_by() == "primary", timeout=30)
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
        primary.stop()
        secondary.stop()


def until_answered_by(world: World, name: str, within_s: float) -> tuple[float, list[str]]:
    """Requests every 50 ms until `name` answers five in a row: (seconds it took, every
    answer seen), bounded by `within_s`."""
    started = time.monotonic()
    answers: list[str] = []
    while time.monotonic() - started < within_s:
        answers.append(world.answered_by())
        if answers[-5:] == [name] * 5:
            return time.monotonic() - started, answers
        time.sleep(0.05)
    raise AssertionError(f"{name} never took the traffic in {within_s} s: {answers}")


def test_the_secondary_takes_over_from_a_failing_primary_and_gives_it_back(
    world: World,
) -> None:
    # The secondary is checked before it is ever used: known healthy when needed.
    wait_until(lambda: world.secondary.requests_to("/hc") or None, timeout=5)
    assert not world.secondary.requests_to("/partner")

    world.primary.behaviour.failing = True
    took, answers = until_answered_by(world, "secondary", within_s=10)
    assert took < FAILOVER_WITHIN_S + 0.5, (took, answers)  # 5 answers in a row included
    # Failed: only the requests the primary answered while its checks were failing.
    assert set(answers) <= {"HTTP 503", "secondary"}, answers
    # Once the secondary has the traffic, no request is lost.
    steady = [world.answered_by() for _ in range(20)]
    assert steady == ["secondary"] * 20

    world.primary.behaviour.failing = False
    took_back, back = until_answered_by(world, "primary", within_s=10)
    assert took_back < FAILOVER_WITHIN_S + 0.5, (took_back, back)
    assert "HTTP 503" not in back  # giving back loses nothing: both are healthy
