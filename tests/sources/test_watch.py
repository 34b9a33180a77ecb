"""Watching a manifest directory: one on_change per burst, prompt stop, missing directories."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from dragoman.sources.watch import fingerprint, watch_directory

# Fast timings so each test takes a fraction of a second; quiet is far longer than the gap
# between writes of a burst, so a slow machine does not split one burst in two.
POLL = 0.02
QUIET = 0.1
GAP = 0.01
SETTLE = QUIET * 2.5  # after a call, long enough that a second one would have happened
DEADLINE = 3.0


class Changes:
    """An on_change callback that counts its calls and lets a test await the next one."""

    def __init__(self) -> None:
        self.calls = 0
        self._event = asyncio.Event()

    async def __call__(self) -> None:
        self.calls += 1
        self._event.set()

    async def next(self) -> None:
        await asyncio.wait_for(self._event.wait(), DEADLINE)
        self._event.clear()


@asynccontextmanager
async def watching(
    path: Path,
    on_change: Callable[[], Awaitable[None] | None],
    **timings: float,
) -> AsyncIterator[None]:
    stop = asyncio.Event()
    options = {"poll_interval": POLL, "quiet_period": QUIET, "max_delay": 1.0, **timings}
    task = asyncio.create_task(watch_directory(path, on_change, stop, **options))
    await asyncio.sleep(POLL * 2)  # let it take its baseline
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 1.0)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def manifest(name: str, padding: int = 0) -> str:
    # Each write changes the size too, so it shows even where mtime is coarse.
    return f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n#{'x' * padding}\n"


async def burst(writes: list[Callable[[], object]]) -> None:
    for write in writes:
        write()
        await asyncio.sleep(GAP)


async def expect_one_call(changes: Changes) -> None:
    await changes.next()
    await asyncio.sleep(SETTLE)
    assert changes.calls == 1


def edit(root: Path) -> list[Callable[[], object]]:
    return [lambda i=i: (root / "a.yaml").write_text(manifest("a", i)) for i in range(1, 5)]


def add(root: Path) -> list[Callable[[], object]]:
    return [
        lambda: (root / "new.yaml").write_text(manifest("new")),
        lambda: (root / "sub").mkdir(),
        lambda: (root / "sub" / "b.yml").write_text(manifest("b")),
        lambda: (root / "c.json").write_text("{}"),
    ]


def delete(root: Path) -> list[Callable[[], object]]:
    return [(root / "a.yaml").unlink, (root / "b.yaml").unlink, (root / "c.yaml").unlink]


def rename(root: Path) -> list[Callable[[], object]]:
    return [
        lambda: os.rename(root / "a.yaml", root / "z.yaml"),
        lambda: os.rename(root / "b.yaml", root / "old.yaml.bak"),
    ]


# Each scenario: a burst of writes that must produce exactly one on_change.
BURSTS: dict[str, Callable[[Path], list[Callable[[], object]]]] = {
    "edit": edit,
    "add": add,
    "delete": delete,
    "rename": rename,
}


def test_each_kind_of_change_gives_one_call_per_burst(tmp_path: Path) -> None:
    roots = {name: tmp_path / name for name in BURSTS}
    for root in roots.values():
        root.mkdir()
        for name in ("a", "b", "c"):
            (root / f"{name}.yaml").write_text(manifest(name))

    async def scenario(name: str) -> tuple[str, int]:
        changes = Changes()
        async with watching(roots[name], changes):
            assert changes.calls == 0  # the tree found at start is not a change
            await burst(BURSTS[name](roots[name]))
            await changes.next()
            await asyncio.sleep(SETTLE)
        return name, changes.calls

    async def test() -> None:
        # The scenarios run side by side, each on its own directory, to keep the suite fast.
        results = await asyncio.gather(*(scenario(name) for name in BURSTS))
        assert dict(results) == dict.fromkeys(BURSTS, 1)

    run(test)


def test_files_that_are_not_manifests_are_not_watched(tmp_path: Path) -> None:
    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes):
            (tmp_path / "notes.txt").write_text("hello")
            (tmp_path / ".web.yaml.swp").write_text("editor state")
            (tmp_path / ".git").mkdir()
            (tmp_path / ".git" / "x.yaml").write_text(manifest("x"))
            await asyncio.sleep(SETTLE)
            assert changes.calls == 0

    run(test)


def test_endless_writes_are_reported_after_max_delay(tmp_path: Path) -> None:
    target = tmp_path / "web.yaml"
    target.write_text(manifest("web"))

    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes, max_delay=0.2):
            loop = asyncio.get_running_loop()
            started = loop.time()
            writes = 0
            while changes.calls == 0 and loop.time() - started < DEADLINE:
                writes += 1
                target.write_text(manifest("web", writes))
                await asyncio.sleep(GAP)
            # Reported while the writes were still coming, not after they stopped.
            assert changes.calls == 1
            assert loop.time() - started < 0.2 + QUIET

    run(test)


def test_plain_function_callback_and_a_failing_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def on_change() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("reload failed")

    async def test() -> None:
        async with watching(tmp_path, on_change):
            (tmp_path / "a.yaml").write_text(manifest("a"))
            await wait_until(lambda: len(calls) == 1)
            (tmp_path / "b.yaml").write_text(manifest("b"))
            await wait_until(lambda: len(calls) == 2)  # still watching after the failure

    run(test)
    assert "manifest directory change handler failed" in caplog.messages


def test_stop_is_prompt_even_with_a_long_poll_interval(tmp_path: Path) -> None:
    async def test() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch_directory(tmp_path, Changes(), stop, poll_interval=60.0))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        stop.set()
        await asyncio.wait_for(task, 1.0)
        assert loop.time() - stopped_at < 0.1

    run(test)


def test_stop_during_a_burst_does_not_wait_for_quiet(tmp_path: Path) -> None:
    async def test() -> None:
        stop = asyncio.Event()
        changes = Changes()
        task = asyncio.create_task(
            watch_directory(
                tmp_path, changes, stop, poll_interval=POLL, quiet_period=30.0, max_delay=60.0
            )
        )
        await asyncio.sleep(POLL * 2)
        (tmp_path / "a.yaml").write_text(manifest("a"))
        await asyncio.sleep(POLL * 3)
        stop.set()
        await asyncio.wait_for(task, 0.5)
        assert changes.calls == 0

    run(test)


def test_directory_that_disappears_is_watched_again_when_it_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watched = tmp_path / "manifests"
    watched.mkdir()
    (watched / "a.yaml").write_text(manifest("a"))
    aside = tmp_path / "aside"

    async def test() -> None:
        changes = Changes()
        async with watching(watched, changes):
            os.rename(watched, aside)
            await wait_until(lambda: any("cannot read" in m for m in caplog.messages))
            await asyncio.sleep(SETTLE)
            assert changes.calls == 0  # a missing directory is not an empty one

            (aside / "a.yaml").write_text(manifest("a", 10))
            os.rename(aside, watched)
            await expect_one_call(changes)

    with caplog.at_level(logging.INFO, logger="dragoman.sources"):
        run(test)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # logged once per outage, not once per poll
    assert any("readable again" in m for m in caplog.messages)


def test_directory_that_returns_unchanged_is_not_a_change(tmp_path: Path) -> None:
    watched = tmp_path / "manifests"
    watched.mkdir()
    (watched / "a.yaml").write_text(manifest("a"))

    async def test() -> None:
        changes = Changes()
        async with watching(watched, changes):
            os.rename(watched, tmp_path / "aside")
            await asyncio.sleep(POLL * 4)
            os.rename(tmp_path / "aside", watched)
            await asyncio.sleep(SETTLE)
            assert changes.calls == 0

    run(test)


def test_directory_missing_at_start_is_reported_when_it_appears(tmp_path: Path) -> None:
    watched = tmp_path / "manifests"

    async def test() -> None:
        changes = Changes()
        async with watching(watched, changes):
            staging = tmp_path / "staging"
            staging.mkdir()
            (staging / "a.yaml").write_text(manifest("a"))
            os.rename(staging, watched)
            await expect_one_call(changes)

    run(test)


def test_fingerprint_changes_with_every_kind_of_change(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(manifest("a"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(manifest("b"))
    seen = [fingerprint(tmp_path)]
    assert sorted(stamp.path for stamp in seen[0]) == ["a.yaml", "sub/b.yml"]

    for change in (
        lambda: (tmp_path / "a.yaml").write_text(manifest("a", 5)),  # edit
        lambda: (tmp_path / "c.json").write_text("{}"),  # add
        lambda: os.rename(tmp_path / "c.json", tmp_path / "d.json"),  # rename
        lambda: (tmp_path / "sub" / "b.yml").unlink(),  # delete
        lambda: shutil.rmtree(tmp_path / "sub"),  # an empty directory: no manifest changed
    ):
        change()
        seen.append(fingerprint(tmp_path))
    assert len(set(seen[:-1])) == 5
    assert seen[-1] == seen[-2]
    unchanged = fingerprint(tmp_path)
    assert unchanged == seen[-1]


async def wait_until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(DEADLINE):
        while not condition():
            await asyncio.sleep(POLL)
