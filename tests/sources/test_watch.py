"""Watching a manifest directory: kernel events, adaptive debounce, the rescan safety net,
ConfigMap volumes, prompt stop, missing directories."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from dragoman.sources import watch as watch_module
from dragoman.sources.inotify import KernelEvents
from dragoman.sources.watch import _scan_with_identity, _sharing, fingerprint, watch_directory
from tests.support.configmap import configmap_volume

# Fast timings so each test takes a fraction of a second; quiet is far longer than the gap
# between writes of a burst, so a slow machine does not split one burst in two.
POLL = 0.05
QUIET = 0.15
GAP = 0.01
SETTLE = QUIET * 2.5  # after a call, long enough that a second one would have happened
DEADLINE = 3.0
NEVER = 3600.0  # a rescan interval no test waits for: what is seen came from the kernel


class Changes:
    """An on_change callback that records what each call reported and lets a test await
    the next call; each call takes `took` seconds (a build) before it is recorded."""

    def __init__(self, took: float = 0.0) -> None:
        self.reports: list[frozenset[str]] = []
        self.times: list[float] = []
        self.took = took
        self._event = asyncio.Event()

    @property
    def calls(self) -> int:
        return len(self.reports)

    @property
    def paths(self) -> set[str]:
        return set().union(*self.reports)

    async def __call__(self, changed: frozenset[str]) -> None:
        if self.took:
            await asyncio.sleep(self.took)
        self.reports.append(changed)
        self.times.append(asyncio.get_running_loop().time())
        self._event.set()

    async def next(self) -> None:
        await asyncio.wait_for(self._event.wait(), DEADLINE)
        self._event.clear()


@asynccontextmanager
async def watching(
    path: Path,
    on_change: Callable[[frozenset[str]], Awaitable[None] | None],
    **options: Any,
) -> AsyncIterator[None]:
    stop = asyncio.Event()
    options = {
        "poll_interval": POLL,
        "quiet_period": QUIET,
        "max_delay": 1.0,
        "rescan_interval": NEVER,
        **options,
    }
    task = asyncio.create_task(watch_directory(path, on_change, stop, **options))
    await asyncio.sleep(0.2)  # let it take its baseline and start the kernel watch
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


# Each scenario: a burst of writes, and the manifest files it changes.
BURSTS: dict[str, tuple[Callable[[Path], list[Callable[[], object]]], set[str]]] = {
    "edit": (edit, {"a.yaml"}),
    "add": (add, {"new.yaml", "sub/b.yml", "c.json"}),
    "delete": (delete, {"a.yaml", "b.yaml", "c.yaml"}),
    "rename": (rename, {"a.yaml", "z.yaml", "b.yaml"}),
}


def test_a_burst_is_its_first_change_at_once_then_the_rest_together(tmp_path: Path) -> None:
    roots = {name: tmp_path / name for name in BURSTS}
    for root in roots.values():
        root.mkdir()
        for name in ("a", "b", "c"):
            (root / f"{name}.yaml").write_text(manifest(name))

    async def scenario(name: str) -> tuple[str, int, set[str]]:
        changes = Changes(took=3 * GAP)  # a build longer than the gaps between writes
        writes, _ = BURSTS[name]
        async with watching(roots[name], changes):
            assert changes.calls == 0  # the tree found at start is not a change
            await burst(writes(roots[name]))
            await changes.next()
            await asyncio.sleep(SETTLE)
        return name, changes.calls, changes.paths

    async def test() -> None:
        # The scenarios run side by side, each on its own directory, to keep the suite fast.
        results = await asyncio.gather(*(scenario(name) for name in BURSTS))
        for name, calls, paths in results:
            assert 1 <= calls <= 2, name  # the lone first change, then the rest of the burst
            assert paths == BURSTS[name][1], name

    run(test)


def test_a_lone_change_is_reported_without_waiting_for_quiet(tmp_path: Path) -> None:
    async def test() -> None:
        changes = Changes(took=0.3)
        # A quiet period far longer than any machine needs to deliver one event.
        async with watching(tmp_path, changes, quiet_period=2.0, max_delay=4.0):
            loop = asyncio.get_running_loop()
            written = loop.time()
            (tmp_path / "a.yaml").write_text(manifest("a"))
            await changes.next()
            assert changes.times[0] - written < 1.3
            assert changes.reports == [frozenset({"a.yaml"})]

            # A change right after it (sooner than half of what its report took) is part of
            # a burst: held for the quiet period.
            (tmp_path / "b.yaml").write_text(manifest("b"))
            (tmp_path / "c.yaml").write_text(manifest("c"))
            await asyncio.sleep(1.0)
            assert changes.calls == 1
            await changes.next()
            assert changes.reports[1] == frozenset({"b.yaml", "c.yaml"})

    run(test)


def test_a_writer_that_waits_for_each_change_to_be_applied_is_not_held(tmp_path: Path) -> None:
    """A change that comes after the last report ended by at least half as long as it took
    is lone, however far within the quiet period; one that comes sooner is a burst."""

    async def test() -> None:
        changes = Changes(took=0.05)
        async with watching(tmp_path, changes, quiet_period=2.0, max_delay=4.0):
            loop = asyncio.get_running_loop()
            for name in ("a", "b", "c"):
                await asyncio.sleep(0.15)  # applied, then a while (longer than it took)
                written = loop.time()
                (tmp_path / f"{name}.yaml").write_text(manifest(name))
                await changes.next()
                assert changes.times[-1] - written < 1.0, name  # not held for 2 s
            assert changes.reports == [frozenset({f"{n}.yaml"}) for n in "abc"]
            (tmp_path / "d.yaml").write_text(manifest("d"))  # right after the last report
            await asyncio.sleep(1.0)
            assert changes.calls == 3  # held: sooner after it than half of what it took

    run(test)


def test_a_slow_report_does_not_make_the_next_change_look_like_a_burst(
    tmp_path: Path,
) -> None:
    """Closeness is measured between the changes' arrivals: a change written right after a
    long report ended, long after the change before it, is lone (reported at once)."""

    async def test() -> None:
        changes = Changes()
        slow = True

        async def on_change(changed: frozenset[str]) -> None:
            nonlocal slow
            if slow:  # the first report takes longer than the quiet period
                slow = False
                await asyncio.sleep(1.5)
            await changes(changed)

        async with watching(tmp_path, on_change, quiet_period=1.0, max_delay=4.0):
            loop = asyncio.get_running_loop()
            (tmp_path / "a.yaml").write_text(manifest("a"))
            await changes.next()
            written = loop.time()
            (tmp_path / "b.yaml").write_text(manifest("b"))
            await changes.next()
            assert changes.times[1] - written < 0.5  # not held for the quiet period
            assert changes.reports == [frozenset({"a.yaml"}), frozenset({"b.yaml"})]

    run(test)


def test_files_that_are_not_manifests_are_not_reported(tmp_path: Path) -> None:
    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes):
            (tmp_path / "notes.txt").write_text("hello")
            (tmp_path / ".web.yaml.swp").write_text("editor state")
            (tmp_path / ".git").mkdir()
            (tmp_path / ".git" / "x.yaml").write_text(manifest("x"))
            (tmp_path / "empty").mkdir()
            await asyncio.sleep(SETTLE)
            assert changes.calls == 0

    run(test)


def test_rewriting_a_file_with_the_same_stamp_is_not_a_change(tmp_path: Path) -> None:
    target = tmp_path / "a.yaml"
    target.write_text(manifest("a"))
    before = os.stat(target)

    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes):
            target.write_text(manifest("a"))
            os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
            await asyncio.sleep(SETTLE)
            assert changes.calls == 0

    run(test)


def test_endless_writes_are_reported_after_max_delay(tmp_path: Path) -> None:
    target = tmp_path / "web.yaml"
    target.write_text(manifest("web"))

    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes, max_delay=0.3):
            loop = asyncio.get_running_loop()
            started = loop.time()
            writes = 0
            while changes.calls < 2 and loop.time() - started < DEADLINE:
                writes += 1
                target.write_text(manifest("web", writes))
                await asyncio.sleep(GAP)
            # The first write at once, then the held ones while writes were still coming.
            assert changes.calls == 2
            assert changes.times[1] - changes.times[0] < 0.3 + QUIET * 2

    run(test)


def test_plain_function_callback_and_a_failing_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[frozenset[str]] = []

    def on_change(changed: frozenset[str]) -> None:
        calls.append(changed)
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


def test_stop_is_prompt(tmp_path: Path) -> None:
    async def test() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch_directory(tmp_path, Changes(), stop))
        await asyncio.sleep(0.1)
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        stop.set()
        await asyncio.wait_for(task, 1.0)
        assert loop.time() - stopped_at < 0.1

    run(test)


def test_stop_during_a_burst_does_not_wait_for_quiet(tmp_path: Path) -> None:
    async def test() -> None:
        stop = asyncio.Event()
        changes = Changes(took=0.3)
        task = asyncio.create_task(
            watch_directory(tmp_path, changes, stop, quiet_period=30.0, max_delay=60.0)
        )
        await asyncio.sleep(0.2)
        (tmp_path / "a.yaml").write_text(manifest("a"))
        await changes.next()  # the lone change
        (tmp_path / "b.yaml").write_text(manifest("b"))  # held: part of a burst
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.wait_for(task, 0.5)
        assert changes.calls == 1

    run(test)


def test_a_configmap_volume_update_is_reported_through_the_symlink_swap(
    tmp_path: Path,
) -> None:
    configmap_volume(tmp_path, "2026_01", {"a.yaml": manifest("a"), "b.yaml": manifest("b")})

    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes):  # no periodic rescan: the kernel tells
            configmap_volume(
                tmp_path, "2026_02", {"a.yaml": manifest("a", 3), "c.yaml": manifest("c")}
            )
            await changes.next()
            await asyncio.sleep(SETTLE)
        assert changes.paths == {"a.yaml", "b.yaml", "c.yaml"}

    run(test)


def test_the_periodic_rescan_finds_what_no_event_reports(tmp_path: Path) -> None:
    # A symbolic link to a file outside the tree: the kernel watches the tree, not the target.
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "shared.yaml"
    target.write_text(manifest("shared"))
    watched = tmp_path / "manifests"
    watched.mkdir()
    (watched / "shared.yaml").symlink_to(target)

    async def test() -> None:
        changes = Changes()
        async with watching(watched, changes, rescan_interval=0.3):
            target.write_text(manifest("shared", 4))
            await changes.next()
        assert changes.reports == [frozenset({"shared.yaml"})]

    run(test)


def test_without_kernel_events_the_tree_is_rescanned(tmp_path: Path) -> None:
    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes, use_kernel_events=False):
            (tmp_path / "a.yaml").write_text(manifest("a"))
            await changes.next()
        assert changes.reports == [frozenset({"a.yaml"})]

    run(test)


def test_a_kernel_watch_that_fails_falls_back_to_rescans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from dragoman.sources import inotify

    def failing_libc() -> Any:
        raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr(inotify, "_libc", failing_libc)

    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes):
            (tmp_path / "a.yaml").write_text(manifest("a"))
            await changes.next()
        assert changes.reports == [frozenset({"a.yaml"})]

    run(test)
    assert any("rescanning it every" in m for m in caplog.messages)


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
            await changes.next()
            assert changes.reports == [frozenset({"a.yaml"})]
            # Watched by the kernel again: a later edit is seen too.
            await asyncio.sleep(SETTLE)
            (watched / "b.yaml").write_text(manifest("b"))
            await changes.next()
            assert changes.reports[-1] == frozenset({"b.yaml"})

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
            await changes.next()
            await asyncio.sleep(SETTLE)
        assert changes.reports == [frozenset({"a.yaml"})]

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


def test_a_save_through_a_temporary_file_needs_no_rescan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.sources import watch

    scans: list[Path] = []
    real = watch._scan_with_identity

    def counting(root: Path) -> Any:
        scans.append(root)
        return real(root)

    monkeypatch.setattr(watch, "_scan_with_identity", counting)
    (tmp_path / "a.yaml").write_text(manifest("a"))

    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes, rescan_interval=NEVER):
            await asyncio.sleep(1.2)  # the one early rescan after start
            before = len(scans)
            temporary = tmp_path / ".a.yaml.tmp"  # as editors and kubectl cp save
            temporary.write_text(manifest("a", 7))
            os.replace(temporary, tmp_path / "a.yaml")
            (tmp_path / ".a.yaml.swp").write_text("editor state")
            await changes.next()
            await asyncio.sleep(SETTLE)
            assert len(scans) == before  # the kernel named the file: one stat, no scan
        assert changes.paths == {"a.yaml"}

    run(test)


def test_a_rescan_keeps_the_stamps_it_already_had(tmp_path: Path) -> None:
    """The watcher's view shares the stamps of the one before it (the loader's baseline, or
    its own last scan) where a file did not change: 10,000 files are stamped once in memory,
    not once per scan."""
    for name in ("a.yaml", "b.yaml", "c.yaml"):
        (tmp_path / name).write_text("{}\n")
    before, _ = _scan_with_identity(tmp_path)
    (tmp_path / "b.yaml").write_text("{kind: x}\n")
    (tmp_path / "c.yaml").unlink()
    (tmp_path / "d.yaml").write_text("{}\n")
    after, _ = _scan_with_identity(tmp_path)
    shared = _sharing(after, before)
    assert shared == after
    assert shared["a.yaml"] is before["a.yaml"]  # unchanged: the old object
    assert shared["b.yaml"] is after["b.yaml"] and shared["b.yaml"] != before["b.yaml"]
    assert shared["d.yaml"] is after["d.yaml"] and "c.yaml" not in shared
    # The paths too: an unchanged file's key is the one the earlier view held.
    [a_path] = [path for path in shared if path == "a.yaml"]
    assert a_path is before["a.yaml"].path and a_path is not after["a.yaml"].path


def test_files_that_could_not_be_read_are_reported_again_whatever_their_stamp(
    tmp_path: Path,
) -> None:
    (tmp_path / "locked.yaml").write_text(manifest("locked"))
    (tmp_path / "a.yaml").write_text(manifest("a"))

    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes, recheck=lambda: {"locked.yaml"}):
            (tmp_path / "a.yaml").write_text(manifest("a", 3))  # any event
            await changes.next()
            assert changes.reports == [frozenset({"a.yaml", "locked.yaml"})]
        rescans = Changes()
        async with watching(
            tmp_path, rescans, recheck=lambda: {"locked.yaml"}, rescan_interval=0.3
        ):
            await rescans.next()  # no event at all: the rescan reports it
        assert rescans.reports[0] == frozenset({"locked.yaml"})

    run(test)


def test_a_file_is_reported_when_its_writer_closes_it_not_while_it_writes(
    tmp_path: Path,
) -> None:
    target = tmp_path / "a.yaml"
    target.write_text(manifest("a"))

    async def test() -> None:
        changes = Changes()
        # Rescans too leave a file being written alone.
        async with watching(tmp_path, changes, rescan_interval=0.2):
            with target.open("w") as writing:  # truncated, then half written
                writing.write("apiVersion: v1\n")
                writing.flush()
                await asyncio.sleep(SETTLE + 0.5)
                assert changes.calls == 0
                writing.write("kind: Service\nmetadata: {name: a}\n")
            await changes.next()
            assert changes.reports[0] == frozenset({"a.yaml"})

    run(test)


def test_the_tree_is_scanned_only_once_the_kernel_watch_is_set_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under load the kernel thread may set its watch up late. A scan taken before that would
    # miss writes in between, and a rescan would not know which files are still open for
    # writing: it could read one half-written.
    target = tmp_path / "a.yaml"
    target.write_text(manifest("a"))
    baseline, _ = _scan_with_identity(tmp_path)
    set_up_at: list[float] = []
    scanned_at: list[float] = []
    set_up, scan = KernelEvents._watch_tree, watch_module._scan_with_identity

    def slow_set_up(self: KernelEvents, *args: Any) -> None:
        time.sleep(0.5)
        set_up(self, *args)
        set_up_at.append(time.monotonic())

    def timed_scan(root: Path) -> Any:
        scanned_at.append(time.monotonic())
        return scan(root)

    monkeypatch.setattr(KernelEvents, "_watch_tree", slow_set_up)
    monkeypatch.setattr(watch_module, "_scan_with_identity", timed_scan)

    async def test() -> None:
        changes = Changes()
        stop = asyncio.Event()
        task = asyncio.create_task(
            watch_directory(
                tmp_path,
                changes,
                stop,
                quiet_period=QUIET,
                rescan_interval=NEVER,
                baseline=baseline,
            )
        )
        await asyncio.sleep(0.1)
        target.write_text(manifest("a", padding=10))  # after the start, before the watch
        try:
            await changes.next()
            assert changes.reports == [frozenset({"a.yaml"})]
        finally:
            stop.set()
            await asyncio.wait_for(task, 1.0)
        assert set_up_at and scanned_at
        assert scanned_at[0] >= set_up_at[0]

    run(test)


def test_files_being_written_are_known_as_of_every_event_queued_before_asking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rescan asks right after its scan; the kernel thread, slow under load, may not have
    # read the write's events yet: the answer waits for them.
    target = tmp_path / "a.yaml"
    target.write_text(manifest("a"))
    read_batch = KernelEvents._batch

    def slow_batch(self: KernelEvents, *args: Any) -> Any:
        time.sleep(0.05)
        return read_batch(self, *args)

    monkeypatch.setattr(KernelEvents, "_batch", slow_batch)
    kernel = KernelEvents(tmp_path, lambda batch: None, lambda error: None)
    try:
        assert kernel.started.wait(5.0)
        with target.open("w") as writing:
            writing.write("apiVersion: v1\n")
            writing.flush()
            assert kernel.writing_now() == frozenset({"a.yaml"})
        assert kernel.writing_now() == frozenset()
    finally:
        kernel.close()


def test_a_file_renamed_into_place_or_linked_is_reported(tmp_path: Path) -> None:
    async def test() -> None:
        changes = Changes()
        async with watching(tmp_path, changes):
            (tmp_path / ".a.yaml.tmp").write_text(manifest("a"))
            (tmp_path / ".a.yaml.tmp").rename(tmp_path / "a.yaml")
            await changes.next()
            assert changes.reports == [frozenset({"a.yaml"})]
            (tmp_path / "b.yaml").symlink_to("a.yaml")
            await changes.next()
            assert changes.reports[1] == frozenset({"b.yaml"})

    run(test)
