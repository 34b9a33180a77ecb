"""Leader election through a Lease on the in-process API server, via the real client."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from dragoman.kubernetes.leader import (
    Attempt,
    LeaderElector,
    LeaseClient,
    LeaseSettings,
    micro_time,
)
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(60)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def leases(api: KubeApiServer) -> Iterator[LeaseClient]:
    api_client = client.ApiClient(api.client_configuration())
    yield LeaseClient(api_client)
    api_client.close()


def elector(leases: LeaseClient, identity: str, clock: FakeClock | None = None) -> LeaderElector:
    settings = LeaseSettings(identity=identity, namespace="default", name="dragoman-leader")
    if clock is None:
        return LeaderElector(leases, settings)
    return LeaderElector(leases, settings, clock=clock)


def spec(api: KubeApiServer) -> dict[str, Any]:
    lease = api.get("leases", "dragoman-leader")
    assert lease is not None
    return lease["spec"]


def test_first_replica_creates_and_holds_the_lease(api: KubeApiServer, leases: LeaseClient) -> None:
    clock = FakeClock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    assert a.try_acquire_or_renew() is Attempt.LEADING
    held = spec(api)
    assert (held["holderIdentity"], held["leaseDurationSeconds"], held["leaseTransitions"]) == (
        "a",
        15,
        0,
    )
    assert held["renewTime"].endswith("Z") and len(held["renewTime"]) == len(
        "2030-01-01T00:00:00.000000Z"
    )
    assert b.try_acquire_or_renew() is Attempt.HELD
    assert spec(api)["holderIdentity"] == "a"


def test_a_lease_expires_only_after_its_duration_on_our_clock(
    api: KubeApiServer, leases: LeaseClient
) -> None:
    clock = FakeClock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    a.try_acquire_or_renew()
    assert b.try_acquire_or_renew() is Attempt.HELD  # b first sees the record now
    clock.now += 10
    assert a.try_acquire_or_renew() is Attempt.LEADING  # renewed: the record changes
    clock.now += 10
    assert b.try_acquire_or_renew() is Attempt.HELD  # b saw the renewal 10 s ago (< 15)
    clock.now += 16  # a is silent for longer than the lease duration
    assert b.try_acquire_or_renew() is Attempt.LEADING
    taken = spec(api)
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == ("b", 1)
    assert taken["acquireTime"] == taken["renewTime"]
    assert a.try_acquire_or_renew() is Attempt.HELD


def test_racing_for_a_lease_only_one_write_wins(api: KubeApiServer, leases: LeaseClient) -> None:
    clock = FakeClock()
    a, b, c = (elector(leases, name, clock) for name in "abc")
    a.try_acquire_or_renew()
    assert a.release()
    stale = leases.get("default", "dragoman-leader")
    assert c.try_acquire_or_renew() is Attempt.LEADING  # a released: c takes it at once
    b.leases = _Stale(leases, stale)  # b read the released Lease before c wrote it
    assert b.try_acquire_or_renew() is Attempt.FAILED  # its write conflicts
    assert spec(api)["holderIdentity"] == "c"


def test_release_hands_over_at_once(api: KubeApiServer, leases: LeaseClient) -> None:
    clock = FakeClock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    a.try_acquire_or_renew()
    assert b.try_acquire_or_renew() is Attempt.HELD
    assert a.release()
    assert "holderIdentity" not in spec(api)
    assert b.try_acquire_or_renew() is Attempt.LEADING
    assert not a.release()  # not ours any more


def test_micro_time_is_rfc3339_with_microseconds() -> None:
    moment = datetime.datetime(2030, 1, 2, 3, 4, 5, 60, tzinfo=datetime.UTC)
    assert micro_time(moment) == "2030-01-02T03:04:05.000060Z"


class _Stale:
    """A LeaseClient whose reads return an old copy; writes go through."""

    def __init__(self, leases: LeaseClient, stale: dict[str, Any] | None) -> None:
        self.leases, self.stale = leases, stale

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.stale

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.leases.create(namespace, body)

    def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.leases.replace(namespace, name, body)


class _Unreachable:
    """A LeaseClient for a replica cut off from the API server."""

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise ConnectionError("API server unreachable")

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("API server unreachable")

    def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("API server unreachable")


def test_two_replicas_one_leader_and_takeover_when_it_goes_silent(
    api: KubeApiServer, leases: LeaseClient
) -> None:
    settings = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.2}
    a = LeaderElector(leases, LeaseSettings(identity="a", **settings))
    b = LeaderElector(leases, LeaseSettings(identity="b", **settings))
    history: list[tuple[str, bool]] = []

    async def scenario() -> None:
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        task_a = asyncio.create_task(a.run(stop_a, lambda on: history.append(("a", on))))
        await asyncio.sleep(0.3)  # a starts first and wins
        task_b = asyncio.create_task(b.run(stop_b, lambda on: history.append(("b", on))))
        both_seen = False
        for _ in range(20):
            await asyncio.sleep(0.05)
            both_seen |= a.is_leader and b.is_leader
        assert a.is_leader and not b.is_leader
        a.leases = _Unreachable()  # type: ignore[assignment]  # a is cut off: it cannot renew
        for _ in range(100):
            await asyncio.sleep(0.05)
            both_seen |= a.is_leader and b.is_leader
            if b.is_leader:
                break
        assert b.is_leader and not a.is_leader
        assert not both_seen
        stop_a.set()
        stop_b.set()
        await asyncio.gather(task_a, task_b)

    asyncio.run(scenario())
    assert history == [("a", True), ("a", False), ("b", True), ("b", False)]
    assert spec(api)["leaseTransitions"] == 1
    assert "holderIdentity" not in spec(api)  # b released it on the way out


class _Hanging:
    """A LeaseClient behind a partitioned network: every request hangs until `cut.set()`."""

    def __init__(self) -> None:
        self.cut = threading.Event()

    def get(self, *args: Any) -> Any:
        self.cut.wait(30)
        raise TimeoutError("read timed out")

    create = replace = get


def test_a_leader_whose_requests_hang_steps_down_before_another_takes_over(
    api: KubeApiServer, leases: LeaseClient
) -> None:
    settings = LeaseSettings(identity="a", lease_duration=2.0, renew_deadline=1.5, retry_period=0.2)
    a = LeaderElector(leases, settings)
    b = LeaderElector(leases, dataclasses.replace(settings, identity="b"))
    hanging = _Hanging()
    history: list[tuple[str, bool, float]] = []

    async def scenario() -> None:
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        task_a = asyncio.create_task(
            a.run(stop_a, lambda on: history.append(("a", on, time.monotonic())))
        )
        await eventually_true(lambda: a.is_leader)
        task_b = asyncio.create_task(
            b.run(stop_b, lambda on: history.append(("b", on, time.monotonic())))
        )
        await asyncio.sleep(0.5)
        assert a.is_leader and not b.is_leader
        a.leases = hanging  # type: ignore[assignment]  # its next request never returns
        cut_at = time.monotonic()
        overlap = []
        while not b.is_leader and time.monotonic() - cut_at < 6:
            await asyncio.sleep(0.01)
            # What the status writer asks: never true of both at once.
            if a.leading_now() and b.leading_now():
                overlap.append(time.monotonic() - cut_at)
        assert b.is_leader, "b never took over"
        assert not a.is_leader and not a.leading_now()
        assert overlap == []
        stop_a.set()  # ends a's campaign at once, its request still hanging
        stop_b.set()
        await asyncio.wait_for(asyncio.gather(task_a, task_b), 5)
        hanging.cut.set()
        [(_, _, lost_at)] = [(w, on, t) for w, on, t in history if w == "a" and not on]
        # a's last renewal was sent before the cut: it stopped within the renew deadline
        # (give or take the loop's lateness), not when its request gave up.
        assert lost_at - cut_at <= settings.renew_deadline + 0.4

    try:
        asyncio.run(scenario())
    finally:
        hanging.cut.set()
    order = [(who, on) for who, on, _ in history]
    assert order == [("a", True), ("a", False), ("b", True), ("b", False)]


class _Slow:
    """A LeaseClient on a slow network: each request moves the fake clock on."""

    def __init__(self, leases: LeaseClient, clock: FakeClock, seconds: float) -> None:
        self.leases, self.clock, self.seconds = leases, clock, seconds

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.clock.now += self.seconds
        return self.leases.get(namespace, name)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.clock.now += self.seconds
        return self.leases.create(namespace, body)

    def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.clock.now += self.seconds
        return self.leases.replace(namespace, name, body)


def test_a_renewal_counts_from_when_its_request_was_sent(leases: LeaseClient) -> None:
    clock = FakeClock()
    settings = LeaseSettings(identity="a")  # renew deadline 10 s
    a = LeaderElector(_Slow(leases, clock, 4.0), settings, clock=clock)  # type: ignore[arg-type]
    seen: list[tuple[bool, float, bool]] = []
    stop = asyncio.Event()

    def on_change(leading: bool) -> None:
        if leading:
            seen.append((leading, clock.now, a.leading_now()))
            clock.now += 2.5  # 10.5 s after the request went out, 2.5 s after the answer
            seen.append((leading, clock.now, a.leading_now()))
            stop.set()

    asyncio.run(a.run(stop, on_change))
    assert seen == [(True, 1008.0, True), (True, 1010.5, False)]


def test_lease_requests_give_up_in_time_for_a_retry_before_the_deadline() -> None:
    for settings in (
        LeaseSettings(identity="a"),
        LeaseSettings(identity="a", lease_duration=2.0, renew_deadline=1.5, retry_period=0.2),
    ):
        budget = (settings.renew_deadline - settings.retry_period) / 2
        assert 0 < settings.request_timeout <= budget


async def eventually_true(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.02)
