"""A stream's wake-up (rung by its reader, the cache and make-before-break, with no task per
stream) and the writes' stall bound (one timer for every stream's writes)."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from dragoman.snapshots import gc_pause
from dragoman.snapshots.gc_pause import SERVING_THRESHOLDS, fit_to_streams, settle_for_serving
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_io import ClientGone, Writes, WriteStalled
from dragoman.xds.server.stream_registry import StreamRegistry
from dragoman.xds.server.wakeup import Wakeup
from tests.support.xds_builders import eds_cluster, snapshot


class _Context:
    """The one method of a gRPC servicer context that Writes uses: `write`, which completes
    when `done` is set, fails with `error`, and records whether it was cancelled."""

    def __init__(self, error: Exception | None = None) -> None:
        self.done = asyncio.Event()
        self.error = error
        self.cancelled = False
        self.written: list[object] = []

    async def write(self, response: object) -> None:
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if self.error is not None:
            raise self.error
        self.written.append(response)


def test_a_ring_before_the_wait_is_not_lost() -> None:
    async def run() -> None:
        wakeup = Wakeup(asyncio.get_running_loop())
        wakeup.ring()
        await asyncio.wait_for(wakeup.wait(), 1)  # returns at once

    asyncio.run(run())


def test_a_ring_wakes_a_waiting_loop_and_a_timeout_ends_the_wait() -> None:
    async def run() -> None:
        wakeup = Wakeup(asyncio.get_running_loop())
        waiting = asyncio.create_task(wakeup.wait())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        wakeup.ring()
        await asyncio.wait_for(waiting, 1)

        wakeup.rung = False
        started = time.monotonic()
        await wakeup.wait(0.05)
        assert 0.04 <= time.monotonic() - started < 1

    asyncio.run(run())


def test_warm_clusters_ring_and_are_taken_once() -> None:
    async def run() -> None:
        wakeup = Wakeup(asyncio.get_running_loop())
        wakeup.warm()
        assert wakeup.rung
        assert wakeup.take_warmed()
        assert not wakeup.take_warmed()

    asyncio.run(run())


def test_every_change_rings_every_listening_stream_in_order_until_it_stops_listening() -> None:
    async def run() -> None:
        cache = SnapshotCache()
        rings: list[str] = []
        first, second = (lambda: rings.append("first")), (lambda: rings.append("second"))
        cache.listen(first)
        cache.listen(second)
        cache.set_snapshots({"": snapshot([eds_cluster("a")])})
        assert rings == ["first", "second"]  # in the order they connected
        cache.unlisten(first)
        cache.set_snapshot("", snapshot([eds_cluster("b")]))
        assert rings == ["first", "second", "second"]

    asyncio.run(run())


def test_a_write_taken_by_the_client_returns_and_a_failed_one_says_the_client_is_gone() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        writes = Writes(timeout_s=5)
        context = _Context()
        context.done.set()
        await writes.write(context, "response", loop)  # type: ignore[arg-type]
        assert context.written == ["response"]

        failing = _Context(error=RuntimeError("reset"))
        failing.done.set()
        with pytest.raises(ClientGone):
            await writes.write(failing, "response", loop)  # type: ignore[arg-type]

    asyncio.run(run())


def test_a_write_the_client_never_takes_stalls_after_the_timeout_and_is_not_cancelled() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        writes = Writes(timeout_s=0.2)
        stalled, taken = _Context(), _Context()
        started = time.monotonic()
        stalling = asyncio.create_task(writes.write(stalled, "never read", loop))  # type: ignore[arg-type]
        # Another stream's writes meanwhile complete as usual.
        taking = asyncio.create_task(writes.write(taken, "read", loop))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        taken.done.set()
        await asyncio.wait_for(taking, 1)
        with pytest.raises(WriteStalled):
            await asyncio.wait_for(stalling, 2)
        waited = time.monotonic() - started
        assert 0.2 <= waited < 0.2 * 1.25 + 0.2
        # gRPC keeps the write's batch until the stream ends: the write itself goes on.
        assert not stalled.cancelled
        stalled.done.set()

    asyncio.run(run())


def test_a_stream_ended_while_it_writes_leaves_the_write_to_finish() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        writes = Writes(timeout_s=5)
        context = _Context()
        writing = asyncio.create_task(writes.write(context, "response", loop))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        writing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writing
        assert not context.cancelled
        context.done.set()
        await asyncio.sleep(0.01)
        assert context.written == ["response"]

    asyncio.run(run())


def test_serving_freezes_what_start_up_made_and_collects_less_often() -> None:
    before, was_serving = gc.get_threshold(), gc_pause._serving
    try:
        settle_for_serving()
        assert gc.get_threshold() == gc_pause.serving_thresholds(gc_pause._streams)
        assert gc.get_threshold()[1:] == SERVING_THRESHOLDS[1:]
        assert gc.get_freeze_count() > 0
    finally:
        gc_pause._serving = was_serving
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_youngest_threshold_follows_the_streams_connected_once_serving() -> None:
    """A push to every stream keeps about 20 objects per stream alive until its write
    completes: the threshold stays above that, never below the serving default."""
    before, was_serving = gc.get_threshold(), gc_pause._serving
    gc_pause._serving = False
    try:
        fit_to_streams(10_000)
        assert gc.get_threshold() == before  # start-up keeps its own
        settle_for_serving()
        assert gc.get_threshold() == (300_000, 20, 20)  # the streams already connected
        registry = StreamRegistry()
        opened = [registry.open("ADS", f"ipv4:10.0.0.{i}:7000", SotwStream()) for i in range(3)]
        assert gc.get_threshold() == SERVING_THRESHOLDS  # 3 streams: the default's floor
        fit_to_streams(2_000)
        assert gc.get_threshold() == (60_000, 20, 20)
        registry.close(opened[0])
        assert gc.get_threshold() == SERVING_THRESHOLDS
    finally:
        gc_pause._serving = was_serving
        gc.unfreeze()
        gc.set_threshold(*before)
