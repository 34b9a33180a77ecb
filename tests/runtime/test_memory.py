"""Freed memory handed back after activity settles: once per burst of activity, never
while it goes on, never when nothing happened. While serving, a large buffer freed is reused
with its pages, not mapped and faulted in again."""

from __future__ import annotations

import asyncio
import platform
import resource

import pytest

from dragoman.runtime import memory
from dragoman.runtime.memory import MemoryTrimmer

INTERVAL = 0.02


def test_trims_once_activity_has_been_still_for_an_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: lambda: trims.append(1))
    released: list[int] = []
    state = {"busy": False, "value": 0}

    def activity() -> int:
        if state["busy"]:  # something new at every look: a build, a stream, ...
            state["value"] += 1
        return state["value"]

    async def scenario() -> list[int]:
        # What the quiet server keeps for nothing is released just before each trim.
        trimmer = MemoryTrimmer(
            activity, interval=INTERVAL, release=lambda: released.append(len(trims))
        )
        stop = asyncio.Event()
        task = asyncio.create_task(trimmer.run(stop))
        seen = []
        await asyncio.sleep(INTERVAL * 6)
        seen.append(trimmer.trims)  # what start-up left behind: trimmed once
        await asyncio.sleep(INTERVAL * 6)
        seen.append(trimmer.trims)  # nothing happened: no more
        state["busy"] = True  # activity going on: never in the middle of it
        await asyncio.sleep(INTERVAL * 6)
        seen.append(trimmer.trims)
        state["busy"] = False
        await asyncio.sleep(INTERVAL * 6)
        seen.append(trimmer.trims)  # settled: once more
        stop.set()
        await asyncio.wait_for(task, 1)
        return seen

    assert asyncio.run(scenario()) == [1, 1, 1, 2]
    assert len(trims) == 2
    assert released == [0, 1]


def test_a_running_trimmer_serves_large_buffers_from_the_heap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "_malloc_trim", lambda: lambda: None)
    calls: list[int] = []
    monkeypatch.setattr(memory, "serve_large_buffers_from_heap", lambda: calls.append(1) or True)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(MemoryTrimmer(lambda: 0, interval=INTERVAL).run(stop))
        await asyncio.sleep(INTERVAL)
        stop.set()
        await asyncio.wait_for(task, 1)

    asyncio.run(scenario())
    assert calls == [1]


def test_large_buffers_freed_are_reused_without_faulting_their_pages_in_again() -> None:
    """A push as gRPC makes it: a copy of a 1.4 MB response for each of ten streams, held at
    once, then freed; five pushes. glibc's default hands the freed heap top back at once
    (beyond twice the largest buffer), so every push faulted in all 3,500 pages again."""
    if platform.libc_ver()[0] != "glibc":
        assert not memory.serve_large_buffers_from_heap()  # nothing to set elsewhere
        return
    assert memory.serve_large_buffers_from_heap()
    size, streams = 1400 * 1024, 10

    def push() -> None:
        copies = [b"\x01" * size for _ in range(streams)]  # each written whole, as a copy is
        del copies

    push()  # the first takes its pages from the system
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        push()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    pages = streams * size // resource.getpagesize()
    assert faults < pages // 10, f"{faults} page faults in 5 pushes of {pages} pages"


def test_the_c_library_trim_runs_where_there_is_one() -> None:
    trim = memory._malloc_trim()
    if trim is not None:  # glibc: returns 0 or 1, never raises
        assert trim() in (0, 1)


def test_closed_streams_are_trimmed_for_while_the_server_stays_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streams that never read close in a burst while other clients keep asking: their memory
    goes back once the closes stop for an interval, not when the whole server is quiet (it
    never is here), and no more often than once per gap."""
    monkeypatch.setattr(memory, "_malloc_trim", lambda: lambda: None)
    released: list[int] = []
    state = {"value": 0, "closed": 0, "closing": False}

    def activity() -> int:
        state["value"] += 1  # busy at every look: other clients keep asking
        return state["value"]

    def closes() -> int:
        if state["closing"]:
            state["closed"] += 50
        return state["closed"]

    gap = INTERVAL * 40

    async def scenario() -> list[int]:
        trimmer = MemoryTrimmer(
            activity,
            interval=INTERVAL,
            release=lambda: released.append(1),
            closes=closes,
            close_gap=gap,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(trimmer.run(stop))
        seen = []
        await asyncio.sleep(gap * 1.5)
        seen.append(trimmer.trims)  # busy, nothing closed: nothing to hand back
        state["closing"] = True
        await asyncio.sleep(INTERVAL * 6)
        seen.append(trimmer.trims)  # never in the middle of a burst of closes
        state["closing"] = False
        await asyncio.sleep(INTERVAL * 6)
        seen.append(trimmer.trims)  # the burst is over: trimmed once
        state["closing"] = True
        await asyncio.sleep(INTERVAL * 3)
        state["closing"] = False
        await asyncio.sleep(INTERVAL * 4)
        seen.append(trimmer.trims)  # another burst, within the gap: not yet
        await asyncio.sleep(gap * 1.5)
        seen.append(trimmer.trims)  # once the gap has passed
        await asyncio.sleep(gap * 1.5)
        seen.append(trimmer.close_trims)  # nothing more closed: no more
        stop.set()
        await asyncio.wait_for(task, 1)
        return seen

    assert asyncio.run(scenario()) == [0, 0, 1, 1, 2, 2]
    assert released == []  # the busy server's bodies are still in use
