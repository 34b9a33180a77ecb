"""Freed memory handed back after activity settles: once per burst of activity, never
while it goes on, never when nothing happened."""

from __future__ import annotations

import asyncio

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
