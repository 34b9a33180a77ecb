"""The cache's side of the proxyless gRPC clients' snapshots: made off the event loop, once
per change and group; a failing translation logged once, its group's clients kept on what
they were last given (never an empty LDS/CDS that would delete it)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from envoy.config.core.v3.base_pb2 import Node

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, LISTENER, Snapshot
from dragoman.xds.protocol.client_kind import grpc_group
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.server.snapshot_cache import UNAVAILABLE, SnapshotCache
from tests.support.xds_builders import ack, eds_cluster, listener, names_in, request, snapshot

GRPC = grpc_group(ALL_GATEWAYS)
GRPC_NODE = Node(id="grpc-1", user_agent_name="gRPC C-core linux Python")
TARGET = "svc.default.svc.cluster.local:80"


def grpc_view(timeout_s: int = 1) -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("c", timeout_s=timeout_s)], listeners=[listener(TARGET, TARGET)]
    )


class Translation:
    """A stand-in GrpcSnapshots: counts calls, records threads, fails or sleeps on demand."""

    def __init__(self, made: Snapshot | None = None, *, delay: float = 0.0) -> None:
        self.made = made
        self.delay = delay
        self.calls: list[str] = []
        self.threads: set[int] = set()

    def snapshot(self, group: str) -> Snapshot:
        self.calls.append(group)
        self.threads.add(threading.get_ident())
        time.sleep(self.delay)
        if self.made is None:
            raise RuntimeError("translation bug")
        return self.made


def test_a_failing_translation_keeps_the_last_good_snapshot_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = grpc_view()
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=Translation(good))
    assert cache.snapshot_for(GRPC) is good
    broken = Translation()
    cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=broken)
    for _ in range(3):  # every stream waking, every request
        assert cache.snapshot_for(GRPC) is good
    assert broken.calls == [ALL_GATEWAYS]
    failures = [r for r in caplog.records if "for gRPC clients failed" in r.getMessage()]
    assert len(failures) == 1 and "the last good one" in failures[0].getMessage()
    assert failures[0].exc_info is not None  # with the stack trace, once
    # The next change is tried again.
    fixed = grpc_view(timeout_s=2)
    cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=Translation(fixed))
    assert cache.snapshot_for(GRPC) is fixed


def test_a_failing_translation_pushes_nothing_to_connected_grpc_clients() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=Translation(grpc_view()))
    stream = SotwStream()
    lds = stream.on_request(request(LISTENER, [TARGET], node=GRPC_NODE), cache.snapshot_for(GRPC))
    assert [names_in(r) for r in lds] == [[TARGET]]
    stream.on_request(ack(lds[0], [TARGET]), cache.snapshot_for(GRPC))
    cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=Translation())
    assert stream.on_snapshot(cache.snapshot_for(GRPC)) == []


def test_a_translation_that_never_worked_serves_nothing_not_an_empty_listener_set() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=Translation())
    assert cache.snapshot_for(GRPC) is UNAVAILABLE
    stream = SotwStream()
    assert stream.on_request(request(LISTENER, [TARGET], node=GRPC_NODE), UNAVAILABLE) == []
    assert stream.on_request(request(CLUSTER, ["c"]), UNAVAILABLE) == []
    # Envoy's groups are unaffected.
    assert cache.snapshot_for(ALL_GATEWAYS).of_type(CLUSTER).version


def test_prepare_translates_off_the_event_loop_once_for_every_waiting_stream() -> None:
    async def scenario() -> None:
        made = grpc_view()
        translation = Translation(made, delay=0.3)
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=translation)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        # A hundred gRPC streams wake at once: one translation, in a worker thread.
        await asyncio.gather(*(cache.prepare(GRPC) for _ in range(100)))
        ticker.cancel()
        assert translation.calls == [ALL_GATEWAYS]
        assert threading.get_ident() not in translation.threads
        assert ticks >= 10, "the event loop stalled while translating"
        assert cache.snapshot_for(GRPC) is made
        # Envoy's groups never wait.
        await asyncio.wait_for(cache.prepare(ALL_GATEWAYS), 0.01)

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_prepare_made_for_replaced_snapshots_is_done_again_for_the_new_ones() -> None:
    async def scenario() -> None:
        old = Translation(grpc_view(), delay=0.2)
        cache = SnapshotCache(per_type=PerTypeConfigSources())
        cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=old)
        waiting = asyncio.ensure_future(cache.prepare(GRPC))
        await asyncio.sleep(0.05)
        new_view = grpc_view(timeout_s=3)
        new = Translation(new_view)
        cache.set_snapshots({ALL_GATEWAYS: snapshot()}, grpc=new)
        await asyncio.wait_for(waiting, 5)
        assert new.calls == [ALL_GATEWAYS]
        assert cache.snapshot_for(GRPC) is new_view

    asyncio.run(asyncio.wait_for(scenario(), 30))
