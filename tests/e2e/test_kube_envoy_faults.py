"""Kubernetes mode under faults of the API server, with a real Envoy carrying steady traffic:
a kind that answers 404 for a while, a watch that goes silent, an API server that refuses
connections. Envoy keeps serving throughout (not one request lost), and what changed
meanwhile reaches it within seconds of the API server's return, or within the silence bound.

dragoman runs in this process (a replica on an event loop of its own thread), so the bounds
can be shortened: the silence that marks a watch dead is seconds here, not minutes."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.kubernetes.informer import WatchSettings
from dragoman.runtime.server_config import parse_config
from tests.support.builders import endpoint_slice, gateway, gateway_class, http_route, service
from tests.support.harness import LAB_CONFIG, backend_of, free_port, rejected_updates, start_envoy
from tests.support.kube_replica import FAST_WATCH, Replica, replica_config
from tests.support.kubeapi import KubeApiServer
from tests.support.steady_traffic import Traffic

pytestmark = pytest.mark.timeout(120)

FLOWS = 4  # connections of steady traffic, each RATE requests a second
RATE = 25.0
SILENCE_S = 3.0  # a watch silent this long is dead (120 s when deployed)


class ReplicaThread:
    """One dragoman replica on an event loop in a thread of its own, so that the test may
    block (on Envoy, on traffic) without stopping it."""

    def __init__(self, api: KubeApiServer, xds_port: int, watch: WatchSettings) -> None:
        import yaml

        # The pods here listen on loopback: the lab's explicit exception for 127.0.0.0/8.
        lab = parse_config(yaml.safe_load(LAB_CONFIG))
        self.config = replica_config(
            None, f"127.0.0.1:{xds_port}", watch=watch, build_options=lab.build_options()
        )
        self.api = api
        self.replica: Replica | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="replica", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self.replica = Replica(self.api, self.config).start()
            self._started.set()
            assert self.replica.task is not None
            await self.replica.task  # until its stop event is set

        asyncio.run(main())

    def start(self) -> ReplicaThread:
        self._thread.start()
        assert self._started.wait(10), "the replica did not start"
        return self

    def metric(self, name: str, **labels: str) -> float | None:
        assert self.replica is not None
        return self.replica.server.metrics.registry.get_sample_value(name, labels)

    def stop(self) -> None:
        if self._loop is not None and self.replica is not None:
            self._loop.call_soon_threadsafe(self.replica.stop_event.set)
        self._thread.join(timeout=20)
        if self.replica is not None:
            self.replica.api_client.close()


@dataclass
class World:
    api: KubeApiServer
    replica: ReplicaThread
    envoy: EnvoyProcess
    listener_port: int
    flows: list[Traffic]

    def backend_of(self, path: str) -> str:
        return backend_of(f"http://127.0.0.1:{self.listener_port}{path}")

    def failed(self) -> dict[str, int]:
        """Every request of the steady traffic that was not answered 2xx, by outcome."""
        lost: dict[str, int] = {}
        for flow in self.flows:
            for outcome, count in flow.answers.items():
                if outcome != "2xx":
                    lost[outcome] = lost.get(outcome, 0) + count
        return lost

    def sent(self) -> int:
        return sum(flow.sent for flow in self.flows)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    listener_port, backend_port = free_port(), free_port("127.0.0.2")
    backends = [
        EchoBackend("web", host="127.0.0.2", port=backend_port).start(),
        EchoBackend("wed", host="127.0.0.3", port=backend_port).start(),
    ]
    dns = DnsResponder().start()
    api = KubeApiServer(bookmark_interval=1.0)
    api.apply(gateway_class())
    api.apply(gateway("edge", listener_port))
    for name, address in (("web", "127.0.0.2"), ("wed", "127.0.0.3")):
        api.apply(service(name, 80, backend_port))
        api.apply(endpoint_slice(name, backend_port, address))
    api.apply(http_route("shop", [("/shop", "web", 80)], parents=("edge",)))
    xds_port = free_port()
    watch = dataclasses.replace(FAST_WATCH, watch_silence_limit=SILENCE_S)
    replica = ReplicaThread(api, xds_port, watch).start()
    envoy: EnvoyProcess | None = None
    flows: list[Traffic] = []
    try:
        envoy = start_envoy(tmp_path, f"127.0.0.1:{xds_port}", dns.port, "default/edge")
        w = World(api, replica, envoy, listener_port, flows)
        wait_until(lambda: w.backend_of("/shop") == "web", timeout=30)
        flows += [Traffic(listener_port, RATE, ("/shop",)).start() for _ in range(FLOWS)]
        time.sleep(0.5)
        yield w
        for flow in flows:
            flow.finish()
        assert rejected_updates(envoy) == {}
    finally:
        for flow in flows:
            flow.finish()
        if envoy is not None:
            envoy.stop()
        replica.stop()
        api.close()
        dns.stop()
        for backend in backends:
            backend.stop()


def seconds_until(check: Callable[[], object], limit: float) -> float:
    """Seconds until `check()` holds; fails the test after `limit`."""
    started = time.monotonic()
    wait_until(check, timeout=limit)
    return time.monotonic() - started


def test_a_kind_answering_404_keeps_envoy_serving_and_is_listed_again_on_its_return(
    world: World,
) -> None:
    """HTTPRoutes answer 404 on every version for longer than a watch's restart takes: the
    routes stay served (not one request lost), a route deleted meanwhile goes only once its
    deletion is seen (by the list on the kind's return), and a route added meanwhile arrives
    within seconds of it."""
    world.api.apply(http_route("gone", [("/gone", "wed", 80)], parents=("edge",)))
    wait_until(lambda: world.backend_of("/gone") == "wed", timeout=10)
    world.api.withdraw_kind("httproutes")
    wait_until(lambda: world.replica.metric("dragoman_kind_not_served", kind="HTTPRoute") == 1)
    world.api.delete("HTTPRoute", "gone")  # not seen: the kind is not served
    world.api.apply(http_route("added", [("/added", "wed", 80)], parents=("edge",)))
    for _ in range(25):  # five seconds without HTTPRoutes
        assert world.backend_of("/gone") == "wed"
        time.sleep(0.2)
    world.api.restore_kind("httproutes")
    returned = seconds_until(lambda: world.backend_of("/added") == "wed", limit=15)
    assert returned < 6, returned  # listed again within seconds, not at the next minute
    # Its deletion seen by that list: withdrawn now, not before.
    wait_until(lambda: world.backend_of("/gone") == "HTTP 404", timeout=10)
    assert world.replica.metric("dragoman_kind_not_served", kind="HTTPRoute") == 0
    assert world.failed() == {}, world.failed()
    assert world.sent() > FLOWS * RATE * 5  # traffic flowed all along


def test_a_silent_watch_and_an_api_server_refusing_connections(world: World) -> None:
    """A watch on which nothing arrives, not even a bookmark: a change made meanwhile
    reaches Envoy once the silence bound has passed and the watch started again. Then the
    API server refuses connections for a few seconds: a change made meanwhile arrives within
    seconds of its return. Envoy keeps serving throughout."""
    world.api.silence_next_watches("httproutes")
    world.api.cut_watches()  # every watch starts again; the routes' one hears nothing
    wait_until(lambda: world.api.outages.silences_pending() == 0, timeout=10)
    world.api.apply(http_route("quiet", [("/quiet", "wed", 80)], parents=("edge",)))
    arrived = seconds_until(lambda: world.backend_of("/quiet") == "wed", limit=SILENCE_S + 10)
    # Not before the watch was found dead (it was silent indeed), and soon after.
    assert SILENCE_S / 2 < arrived < SILENCE_S + 5, arrived
    assert world.replica.metric("dragoman_watch_silences_total", kind="HTTPRoute") == 1

    world.api.stop()  # connections refused
    world.api.apply(http_route("outage", [("/outage", "wed", 80)], parents=("edge",)))
    time.sleep(4.0)
    assert world.backend_of("/shop") == "web"
    world.api.start()
    arrived = seconds_until(lambda: world.backend_of("/outage") == "wed", limit=15)
    assert arrived < 5, arrived  # the probe every 2 s, not a backoff grown to 30 s
    assert world.failed() == {}, world.failed()
