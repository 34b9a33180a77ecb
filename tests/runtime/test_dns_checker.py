"""The DNS check's shell: real lookups against DNS responders on loopback, the schedule by
TTL, and the loop that rebuilds a controller when a name resolves differently."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
from collections.abc import Iterator

import dns.message
import dns.rcode
import pytest

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.options import BuildOptions
from dragoman.demo.dns import DnsResponder
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.runtime.controller import Controller
from dragoman.runtime.dns_checker import DnsChecker, DnsCheckLoop, DnsResolver, Resolution
from dragoman.runtime.server_config import DnsCheckSettings
from dragoman.store import Store
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.builders import external_service, http_route, typed
from tests.support.status_builds import GATEWAY


@pytest.fixture(scope="module")
def responder() -> Iterator[DnsResponder]:
    with DnsResponder(ttl=30) as server:
        server.set_a("api.check.test", "192.0.2.20", "192.0.2.10")
        server.set_aaaa("api.check.test", "2001:db8::1")
        server.set_a("v4.check.test", "192.0.2.30")
        server.set_a("empty.check.test")  # the name exists, with no address
        yield server


def settings(*servers: tuple[str, int], timeout: float = 1.0) -> DnsCheckSettings:
    return DnsCheckSettings(
        enabled=True, resolvers=servers, timeout_s=timeout, min_interval_s=5, max_interval_s=60
    )


def resolve(server: tuple[str, int], name: str, timeout: float = 1.0) -> Resolution:
    return asyncio.run(DnsResolver(settings(server, timeout=timeout))(name))


def test_a_name_resolves_to_its_addresses_of_both_families(responder: DnsResponder) -> None:
    result = resolve(responder.address, "api.check.test")

    assert result == Resolution(("192.0.2.10", "192.0.2.20", "2001:db8::1"), ttl=30.0)


def test_an_unknown_name_is_nxdomain(responder: DnsResponder) -> None:
    assert resolve(responder.address, "ghost.check.test") == Resolution(error="NXDOMAIN")


def test_a_name_without_addresses_is_no_answer(responder: DnsResponder) -> None:
    assert resolve(responder.address, "empty.check.test") == Resolution(error="NoAnswer")


def test_names_are_asked_as_absolute_names(responder: DnsResponder) -> None:
    responder.reset_counts()
    resolve(responder.address, "v4.check.test.")
    assert responder.query_count("v4.check.test") == 2  # A and AAAA, nothing appended


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int]]:
    """A UDP socket that reads nothing: every query times out."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()


def test_a_silent_resolver_is_a_bounded_timeout(silent_server: tuple[str, int]) -> None:
    async def timed() -> tuple[Resolution, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await DnsResolver(settings(silent_server, timeout=0.3))("api.check.test")
        return result, loop.time() - started

    result, elapsed = asyncio.run(timed())

    assert result == Resolution(error="Timeout")
    assert elapsed < 2.0


@pytest.fixture
def failing_server() -> Iterator[tuple[str, int]]:
    """Answers every query with SERVFAIL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                wire, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            reply = dns.message.make_response(dns.message.from_wire(wire))
            reply.set_rcode(dns.rcode.SERVFAIL)
            sock.sendto(reply.to_wire(), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()
    finally:
        done.set()
        thread.join(2)
        sock.close()


def test_a_failing_resolver_is_servfail(failing_server: tuple[str, int]) -> None:
    assert resolve(failing_server, "api.check.test") == Resolution(error="SERVFAIL")


# --- the schedule ------------------------------------------------------------------------------


class FakeResolve:
    def __init__(self) -> None:
        self.answers: dict[str, Resolution] = {}
        self.asked: list[str] = []

    async def __call__(self, name: str) -> Resolution:
        self.asked.append(name)
        return self.answers.get(name, Resolution(error="NXDOMAIN"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_names_are_checked_again_when_their_ttl_runs_out_within_bounds() -> None:
    fake, clock = FakeResolve(), Clock()
    fake.answers = {
        "short.test": Resolution(("192.0.2.1",), ttl=1),
        "mid.test": Resolution(("192.0.2.2",), ttl=20),
        "long.test": Resolution(("192.0.2.3",), ttl=86400),
    }
    checker = DnsChecker(settings(), fake, clock)
    names = ["short.test", "mid.test", "long.test", "ghost.test"]

    changed = asyncio.run(checker.check(names))

    assert sorted(changed) == sorted(names)
    assert checker.observations["ghost.test"] == DnsObservation(error="NXDOMAIN")
    due = {name: round(checker._due[name] - clock.now) for name in names}
    # TTL 1 s: the minimum (5 s); 20 s: its TTL; a day: the maximum (60 s); a failure: minimum.
    assert due == {"short.test": 5, "mid.test": 20, "long.test": 60, "ghost.test": 5}
    assert checker.seconds_until_due() == 5

    fake.asked.clear()
    clock.now += 6
    assert asyncio.run(checker.check(names)) == []  # due again, but nothing changed
    assert sorted(fake.asked) == ["ghost.test", "short.test"]


def test_a_failure_after_an_answer_keeps_the_checked_addresses() -> None:
    fake, clock = FakeResolve(), Clock()
    fake.answers = {"api.test": Resolution(("192.0.2.1",), ttl=5)}
    checker = DnsChecker(settings(), fake, clock)
    asyncio.run(checker.check(["api.test"]))

    fake.answers = {"api.test": Resolution(error="Timeout")}
    clock.now += 10
    changed = asyncio.run(checker.check(["api.test"]))

    assert changed == ["api.test"]
    assert checker.observations["api.test"] == DnsObservation(("192.0.2.1",), "Timeout")


def test_names_no_longer_asked_for_are_forgotten() -> None:
    fake = FakeResolve()
    checker = DnsChecker(settings(), fake, Clock())
    asyncio.run(checker.check(["a.test", "b.test"]))

    asyncio.run(checker.check(["b.test"]))

    assert set(checker.observations) == {"b.test"}


def test_a_resolver_that_raises_is_a_failure_not_a_crash() -> None:
    async def broken(name: str) -> Resolution:
        raise RuntimeError("bug")

    checker = DnsChecker(settings(), broken, Clock())
    asyncio.run(checker.check(["a.test"]))

    assert checker.observations["a.test"] == DnsObservation(error="SERVFAIL")


# --- the loop feeding a controller -----------------------------------------------------------


def store() -> Store:
    return Store.from_objects(
        typed(GATEWAY, external_service("ext", "api.check.test"), http_route("r", "ext", 443))
    )


def served(controller: Controller, cluster: str) -> list[str]:
    """The addresses of the cluster's endpoints, as Envoy is served them (EDS)."""
    assert controller.dag is not None
    cla = controller.dag.load_assignments[cluster]
    return [e.address for locality in cla.localities for e in locality.endpoints]


def dns_condition(controller: Controller) -> dict[str, object]:
    assert controller.dag is not None
    [status] = [s for k, s in controller.dag.statuses.items() if k.kind == "HTTPRoute"]
    [parent] = status.status["parents"]
    [found] = [c for c in parent["conditions"] if c["type"] == "DNSResolved"]
    return dict(found)


def test_the_loop_serves_checked_addresses_and_refuses_a_rebinding(
    responder: DnsResponder,
) -> None:
    clock = Clock()
    # Both families served (lookupFamily: all), so every checked address is an endpoint.
    options = BuildOptions(dns_check=True, dns_lookup_family="ALL")
    controller = Controller(SnapshotCache(per_type=PerTypeConfigSources()), options)
    controller.update(store())
    assert controller.dag is not None
    assert controller.dag.clusters == {}  # not checked yet: not served
    assert controller.dag.dns_hostnames == ("api.check.test",)
    updates = []
    loop = DnsCheckLoop(
        controller, DnsChecker(settings(responder.address), clock=clock), updates.append
    )

    first = asyncio.run(loop.check_once())

    assert first is not None and first.kind == "incremental"  # the routes forwarding to the name
    assert list(controller.dag.clusters) == ["default/ext/443"]
    checked = ["192.0.2.10", "192.0.2.20", "2001:db8::1"]
    assert controller.dns["api.check.test"].addresses == tuple(checked)
    # What was checked is what Envoy connects to: the name's endpoints, over EDS.
    assert served(controller, "default/ext/443") == checked
    # Nothing due: nothing asked, nothing rebuilt.
    assert asyncio.run(loop.check_once()) is None

    # A legitimate change: endpoints only, no build; the condition names the new answer.
    responder.set_a("api.check.test", "192.0.2.30")
    try:
        clock.now += 31
        moved = asyncio.run(loop.check_once())
        assert moved is not None and moved.kind == "endpoints"
        assert served(controller, "default/ext/443") == ["192.0.2.30", "2001:db8::1"]
        assert "192.0.2.30" in str(dns_condition(controller)["message"])

        # Rebinding to the metadata address: never served. The last accepted addresses
        # stay for the grace (the accepted answer's TTL, 30 s), and the route says why.
        responder.set_a("api.check.test", "169.254.169.254")
        clock.now += 31
        refused = asyncio.run(loop.check_once())
        assert refused is not None and refused.kind == "endpoints"
        assert refused.statuses_changed  # a status writer publishes the new DNSResolved
        assert served(controller, "default/ext/443") == ["192.0.2.30", "2001:db8::1"]
        condition = dns_condition(controller)
        assert (condition["status"], condition["reason"]) == ("False", "DNSCheckFailed")
        assert "169.254.169.254" in str(condition["message"])

        # After the grace: no endpoint (Envoy answers 503), never the refused address.
        clock.now += 31
        ended = asyncio.run(loop.check_once())
        assert ended is not None and ended.kind == "endpoints"
        assert served(controller, "default/ext/443") == []
        assert list(controller.dag.clusters) == ["default/ext/443"]
        assert "503" in str(dns_condition(controller)["message"])
    finally:
        responder.set_a("api.check.test", "192.0.2.20", "192.0.2.10")

    # Back to an allowed answer: served again, endpoints only.
    clock.now += 31
    back = asyncio.run(loop.check_once())
    assert back is not None and back.kind == "endpoints"
    assert served(controller, "default/ext/443") == checked
    assert dns_condition(controller)["status"] == "True"
    assert updates == [first, moved, refused, ended, back]
    # Every fast-path result is what a full build of the same inputs makes.
    rebuilt = build(controller.store, controller.build_options, controller.dns)
    assert controller.dag.load_assignments == rebuilt.load_assignments
    assert controller.dag.statuses == rebuilt.statuses


def test_a_name_refused_before_any_answer_was_accepted_gets_no_cluster(
    responder: DnsResponder,
) -> None:
    responder.set_a("api.check.test", "169.254.169.254")
    try:
        controller = Controller(SnapshotCache(), BuildOptions(dns_check=True))
        controller.update(store())
        loop = DnsCheckLoop(controller, DnsChecker(settings(responder.address), clock=Clock()))
        result = asyncio.run(loop.check_once())
    finally:
        responder.set_a("api.check.test", "192.0.2.20", "192.0.2.10")
    assert result is not None and result.kind == "incremental"
    assert controller.dag is not None and controller.dag.clusters == {}
    assert [p.reason for p in result.new_problems] == ["NotAllowedByPolicy"]


def test_a_configured_grace_bounds_how_long_accepted_addresses_stay() -> None:
    fake = FakeResolve()
    fake.answers["a.test"] = Resolution(("192.0.2.1",), ttl=60)
    clock = Clock()
    checker = DnsChecker(
        dataclasses.replace(settings(), grace_s=10, min_interval_s=5, max_interval_s=300),
        fake,
        clock,
    )
    asyncio.run(checker.check(["a.test"]))
    fake.answers["a.test"] = Resolution(("127.0.0.1",), ttl=60)
    clock.now += 60
    asyncio.run(checker.check(["a.test"]))
    assert checker.observations["a.test"].kept == ("192.0.2.1",)
    # Due again when the grace ends, not a whole TTL later.
    assert checker.seconds_until_due() == 10
    clock.now += 10
    assert asyncio.run(checker.check(["a.test"])) == ["a.test"]
    assert checker.observations["a.test"].kept == ()


def test_the_loop_stops_when_asked() -> None:
    controller = Controller(
        SnapshotCache(per_type=PerTypeConfigSources()), BuildOptions(dns_check=True)
    )
    controller.update(store())
    loop = DnsCheckLoop(controller, DnsChecker(settings(), FakeResolve(), Clock()))

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(loop.run(stop))
        await asyncio.sleep(0.1)
        stop.set()
        await asyncio.wait_for(task, 2)

    asyncio.run(scenario())
    assert controller.dns == {"api.check.test": DnsObservation(error="NXDOMAIN")}


def test_each_round_that_resolves_is_timed_into_the_metrics() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from dragoman.runtime.metrics import Metrics

    fake, clock = FakeResolve(), Clock()
    fake.answers = {"api.test": Resolution(("192.0.2.1",), ttl=30)}
    metrics = Metrics()
    checker = DnsChecker(settings(), fake, clock, on_round=metrics.dns_checked)
    asyncio.run(checker.check(["api.test"]))
    asyncio.run(checker.check(["api.test"]))  # nothing due: no round, nothing timed
    clock.now += 31
    asyncio.run(checker.check(["api.test"]))
    [family] = [
        f
        for f in text_string_to_metric_families(metrics.exposition().decode())
        if f.name == "dragoman_dns_check_duration_seconds"
    ]
    counts = [s.value for s in family.samples if s.name.endswith("_count")]
    assert counts == [2]
