"""Notice changes to a manifest directory: the kernel tells (inotify), and a periodic full
rescan is the safety net.

Events name the files that changed, so only those are stat-ed and reported: at 10,000 files
an idle directory costs nothing, and one edit costs one stat. A file is reported when its
writer closes it or it is renamed into place, never half-way through a write; a rescan
leaves alone the files being written too. Events anywhere else (a hidden
path such as the `..data` symlink a Kubernetes ConfigMap volume swaps, a directory, a file
that is not a manifest) make the watcher rescan the whole tree and report what differs. The
rescan also runs every `rescan_interval`, for what no event reports: a symbolic link's
target outside the tree edited, a network filesystem, a full kernel event queue. Where the
kernel cannot watch (no inotify, too many watches) the rescan runs every `poll_interval`.

Debounce adapts: a change that follows a quiet period is reported at once, and so is one
that comes after the last report ended by at least half as long as that report took (a
writer that waits for each change to be applied; reports of such changes then take at most
two thirds of the time); changes that follow closer are a burst, reported together once the
tree has been quiet for `quiet_period` (or `max_delay` after the burst's first held change,
if writes keep coming).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Final, Literal

from dragoman.sources.inotify import KernelEvents
from dragoman.sources.reads import can_open
from dragoman.sources.tree import FileStamp, fingerprint, scan_tree

__all__ = ["FileStamp", "OnChange", "fingerprint", "watch_directory"]

log = logging.getLogger("dragoman.sources")

# How long a start waits for the kernel watch to be set up (a deep tree takes a while).
KERNEL_START_TIMEOUT = 10.0

# Relative paths of the manifest files added, edited or removed since the last call.
OnChange = Callable[[frozenset[str]], Awaitable[None] | None]
View = dict[str, FileStamp]


async def watch_directory(
    path: Path,
    on_change: OnChange,
    stop: asyncio.Event,
    *,
    quiet_period: float = 0.01,
    max_delay: float = 1.0,
    rescan_interval: float = 60.0,
    poll_interval: float = 1.0,
    use_kernel_events: bool = True,
    baseline: Mapping[str, FileStamp] | None = None,
    recheck: Callable[[], Collection[str]] = frozenset,
) -> None:
    """Call on_change with the changed manifest files below path, until stop is set.

    `baseline` is the tree as its reader last saw it (relative path -> stamp): what differs
    from it on entry is reported at once, so nothing changed between that read and the start
    of the watch is missed. Without one, the tree as found on entry is the baseline (a
    directory missing on entry is reported when it appears). While the directory is missing or
    unreadable nothing is reported (checked every `poll_interval`); when it returns, it is
    compared with the last tree seen. An exception from on_change is logged and watching
    goes on.

    `recheck` names the files that could not be read last time: they are reported with every
    kernel batch and every rescan whatever their stamp says, since the repair of a permission
    (`chmod`) leaves the stamp as it was.
    """
    await _Watcher(
        path,
        on_change,
        stop,
        quiet_period=quiet_period,
        max_delay=max_delay,
        rescan_interval=rescan_interval,
        poll_interval=poll_interval,
        use_kernel_events=use_kernel_events,
        recheck=recheck,
    ).run(baseline)


class _Watcher:
    def __init__(
        self,
        path: Path,
        on_change: OnChange,
        stop: asyncio.Event,
        *,
        quiet_period: float,
        max_delay: float,
        rescan_interval: float,
        poll_interval: float,
        use_kernel_events: bool,
        recheck: Callable[[], Collection[str]],
    ) -> None:
        self.path = path
        self.recheck = recheck
        self.on_change = on_change
        self.stop = stop
        self.quiet_period = quiet_period
        self.max_delay = max_delay
        self.rescan_interval = rescan_interval
        self.poll_interval = poll_interval
        self.use_kernel_events = use_kernel_events
        self.loop = asyncio.get_running_loop()
        self.view: View = {}
        self.missing = False
        self.root_identity: tuple[int, int] | None = None
        # Paths reported by the kernel (None: something needs a full rescan) since last read.
        self.events: asyncio.Queue[frozenset[str] | None] = asyncio.Queue()
        self._arrival = asyncio.Event()  # set by the kernel thread's hand-over
        self.kernel: KernelEvents | None = None
        self.kernel_failed = not use_kernel_events
        self.pending: set[str] = set()  # changes held back while a burst goes on
        self.first_held = 0.0
        self.last_change = 0.0
        # When the latest change arrived (loop time), and when the batch being taken did.
        self.last_arrival = float("-inf")
        self.queued_since: float | None = None
        self.batch_arrival = 0.0
        self.last_rescan = 0.0
        # When the last report ended (loop time), and how long it took.
        self.report_ended = float("-inf")
        self.report_took = 0.0

    async def run(self, baseline: Mapping[str, FileStamp] | None) -> None:
        if self.path.is_dir():
            await self._ensure_kernel_events()  # before the baseline: no change falls between
        view = await self._scan()
        self.missing = view is None
        self.view = dict(baseline) if baseline is not None else view or {}
        # A kernel watch slower to start than KERNEL_START_TIMEOUT may miss what came before
        # it: rescan soon once, then at the interval.
        self.last_rescan = self.loop.time() - self.rescan_interval + min(1.0, self.rescan_interval)
        try:
            changed: set[str] = set()
            if view is not None and baseline is not None:
                changed = {
                    p for p in view.keys() | baseline.keys() if view.get(p) != baseline.get(p)
                }
                self.view = _sharing(view, baseline)
            # This frame lives as long as the watcher: it must not keep the first scan's
            # stamps (10,000 of them) besides the view's.
            del view
            if changed:
                self.pending = set(changed)
                await self._report()
            while True:
                await self._ensure_kernel_events()
                now = self.loop.time()
                next_rescan = self.last_rescan + self._rescan_period()
                due = next_rescan
                if self.pending:
                    due = min(due, self.last_change + self.quiet_period)
                    due = min(due, self.first_held + self.max_delay)
                batch = await self._next_event(max(0.0, due - now))
                if self.stop.is_set():
                    return
                now = arrival = self.loop.time()
                changed = set()
                if batch is _TIMEOUT:
                    if now >= next_rescan:
                        changed = await self._rescan()
                else:
                    arrival = self.batch_arrival
                    changed = await self._apply(batch)
                if changed:
                    # A lone change goes out at once: quiet_period or more after the one
                    # before (measured between arrivals: a slow build does not make the next
                    # change look close to the last), or after the last report ended by half
                    # as long as it took. One that follows closer is part of a burst and
                    # waits for the burst to end.
                    lone = not self.pending and (
                        arrival - self.last_arrival >= self.quiet_period
                        or arrival - self.report_ended >= self.report_took / 2
                    )
                    self.last_arrival = arrival
                    if not self.pending:
                        self.first_held = now
                    self.pending |= changed
                    self.last_change = now
                    if lone:
                        await self._report()
                        continue
                if self.pending and (
                    now - self.last_change >= self.quiet_period
                    or now - self.first_held >= self.max_delay
                ):
                    await self._report()
        finally:
            self._stop_kernel_events()

    def _rescan_period(self) -> float:
        watching = self.kernel is not None and not self.missing
        return self.rescan_interval if watching else self.poll_interval

    async def _report(self) -> None:
        changed, self.pending = frozenset(self.pending), set()
        began = self.loop.time()
        try:
            result = self.on_change(changed)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("manifest directory change handler failed")
        self.report_ended = self.loop.time()
        self.report_took = self.report_ended - began

    async def _next_event(
        self, timeout: float
    ) -> frozenset[str] | Literal[_Timeout.TIMEOUT] | None:
        """The next kernel batch (with any queued behind it), or _TIMEOUT."""
        if self.events.empty():
            stopping = asyncio.ensure_future(self.stop.wait())
            arrived = asyncio.ensure_future(self._arrival.wait())
            try:
                await asyncio.wait(
                    (stopping, arrived), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                stopping.cancel()
                arrived.cancel()
            self._arrival.clear()
        if self.events.empty():
            return _TIMEOUT
        self.batch_arrival = self.queued_since if self.queued_since is not None else 0.0
        self.queued_since = None
        batch = self.events.get_nowait()
        while not self.events.empty():
            more = self.events.get_nowait()
            batch = None if batch is None or more is None else batch | more
        return batch

    async def _apply(self, batch: frozenset[str] | None) -> set[str]:
        """Brings the view up to date with the kernel's events; returns what changed."""
        if batch is None or self.missing:
            return await self._rescan()
        changed = await asyncio.to_thread(_restat, self.path, self.view, batch)
        return changed | set(self.recheck())

    async def _rescan(self) -> set[str]:
        self.last_rescan = self.loop.time()
        view = await self._scan()
        if view is None:
            self.missing = True
            return set()
        if self.missing:
            log.info("manifest directory %s is readable again", self.path)
            self.missing = False
        kernel = self.kernel
        writing = await asyncio.to_thread(kernel.writing_now) if kernel is not None else ()
        for path in writing:
            # Being written: read once its writer closes it (the kernel reports that).
            view.pop(path, None)
            if path in self.view:
                view[path] = self.view[path]
        changed = {p for p in view.keys() | self.view.keys() if view.get(p) != self.view.get(p)}
        self.view = _sharing(view, self.view)
        return changed | set(self.recheck())

    async def _scan(self) -> View | None:
        """The tree's stamps, or None (logged once per outage) when it cannot be read."""
        try:
            view, identity = await asyncio.to_thread(_scan_with_identity, self.path)
        except OSError as exc:
            if not self.missing:
                log.warning(
                    "cannot read manifest directory %s (%s); watching for it to return",
                    self.path,
                    exc.strerror or exc,
                )
            self.missing = True
            self._stop_kernel_events()
            return None
        if self.root_identity is not None and identity != self.root_identity:
            # A new directory at the path: the kernel watch was on the old one.
            self._stop_kernel_events()
        self.root_identity = identity
        return view

    async def _ensure_kernel_events(self) -> None:
        if self.kernel is not None or self.kernel_failed or self.missing:
            return
        self.kernel = kernel = KernelEvents(self.path, self._hand_over, self._failed_in_thread)
        # The watch is set up in the kernel thread: until it is, a write would go unseen, and
        # a rescan could take a file its writer has not closed yet for a whole one.
        if not await asyncio.to_thread(kernel.started.wait, KERNEL_START_TIMEOUT):
            log.warning("watching %s for changes has not started yet", self.path)

    def _hand_over(self, batch: frozenset[str] | None) -> None:
        """From the kernel thread: a batch for the event loop."""
        with contextlib.suppress(RuntimeError):  # the loop has closed
            self.loop.call_soon_threadsafe(self._deliver, batch)

    def _failed_in_thread(self, error: BaseException) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed
            self.loop.call_soon_threadsafe(self._kernel_failed, error)

    def _deliver(self, batch: frozenset[str] | None) -> None:
        if self.kernel is None:
            return  # from a watch stopped since
        if self.queued_since is None:
            self.queued_since = self.loop.time()
        self.events.put_nowait(batch)
        self._arrival.set()

    def _kernel_failed(self, error: BaseException) -> None:
        log.warning(
            "cannot watch %s for changes (%s); rescanning it every %.1f s instead",
            self.path,
            error,
            self.poll_interval,
        )
        self.kernel_failed = True
        self._stop_kernel_events()

    def _stop_kernel_events(self) -> None:
        if self.kernel is not None:
            self.kernel.close()
            self.kernel = None


class _Timeout(enum.Enum):
    """What _next_event returns when no batch came in time."""

    TIMEOUT = enum.auto()


_TIMEOUT: Final = _Timeout.TIMEOUT


def _scan_with_identity(root: Path) -> tuple[View, tuple[int, int]]:
    info = os.stat(root)
    scan = scan_tree(root)
    return {stamp.path: stamp for stamp in scan.files}, (info.st_dev, info.st_ino)


def _sharing(view: View, previous: Mapping[str, FileStamp]) -> View:
    """`view` holding the stamps of `previous` where they are equal, keyed by their paths:
    at 10,000 files the loader's (the baseline) and the watcher's stamps and paths are one set
    of objects, and a rescan that found nothing new leaves nothing new behind."""
    shared: View = {}
    for path, stamp in view.items():
        before = previous.get(path)
        if before is not None and before == stamp:
            shared[before.path] = before
        else:
            shared[path] = stamp
    return shared


def _restat(root: Path, view: View, paths: frozenset[str]) -> set[str]:
    """Updates view for the given files; returns those whose stamp changed. A path that
    turns out to be a directory or below a missing one falls back to a rescan."""
    changed: set[str] = set()
    for relative in paths:
        try:
            info = os.stat(root / relative)
        except OSError:
            stamp = None
        else:
            if stat.S_ISDIR(info.st_mode):
                # A directory named like a manifest: what it holds needs the full scan.
                fresh = {s.path: s for s in scan_tree(root).files}
                changed |= {p for p in fresh.keys() | view.keys() if fresh.get(p) != view.get(p)}
                view.clear()
                view.update(fresh)
                continue
            stamp = (
                FileStamp(relative, info.st_mtime_ns, info.st_size, info.st_ino)
                if stat.S_ISREG(info.st_mode)
                else None
            )
        if view.get(relative) != stamp:
            changed.add(relative)
            if stamp is None:
                view.pop(relative, None)
            else:
                view[relative] = stamp
        elif stamp is not None and not can_open(root / relative):
            # A `chmod` changes no stamp: the event itself says something happened to it.
            changed.add(relative)
    return changed
