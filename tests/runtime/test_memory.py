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
