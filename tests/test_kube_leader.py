"""Leader election through a Lease on the in-process API server, via the real client."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
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
from tests.kubeapi import KubeApiServer

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
