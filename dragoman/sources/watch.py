"""Notice changes to a manifest directory by polling, with no dependency beyond the stdlib.

Polling a fingerprint (path, mtime, size, inode of every manifest file) sees adds, edits,
deletes and renames on every filesystem, including ConfigMap volumes and bind mounts where
inotify events are unreliable.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from dragoman.sources.tree import FileStamp, fingerprint

__all__ = ["FileStamp", "fingerprint", "watch_directory"]

log = logging.getLogger("dragoman.sources")

Fingerprint = frozenset[FileStamp]


async def watch_directory(
    path: Path,
    on_change: Callable[[], Awaitable[None] | None],
    stop: asyncio.Event,
    *,
    poll_interval: float = 0.2,
    quiet_period: float = 0.15,
    max_delay: float = 1.0,
) -> None:
    """Call on_change once per burst of changes below path, until stop is set.

    The tree as found on entry is the baseline: nothing is reported for it (a directory
    missing on entry is reported when it appears). After a change, on_change runs once the
    tree has been quiet for quiet_period, or max_delay after the first change of the burst
    if writes keep coming. While the directory is missing or unreadable nothing is
    reported; when it returns, it is compared with the last tree seen. An exception from
    on_change is logged and watching goes on.
    """
    loop = asyncio.get_running_loop()
    last: Fingerprint | None = await _read(path, missing=False)
    missing = last is None
    first_change: float | None = None  # loop time of the first change not yet reported
    last_change = 0.0

    while True:
        timeout = poll_interval
        if first_change is not None and not missing:
            now = loop.time()
            due = min(last_change + quiet_period, first_change + max_delay)
            timeout = max(0.0, min(poll_interval, due - now))
        if await _stopped(stop, timeout):
            return

        current = await _read(path, missing=missing)
        if current is None:
            missing = True
            continue
        if missing:
            log.info("manifest directory %s is readable again", path)
            missing = False
        now = loop.time()
        if current != last:
            last = current
            last_change = now
            if first_change is None:
                first_change = now
        if first_change is not None and (
            now - last_change >= quiet_period or now - first_change >= max_delay
        ):
            first_change = None
            await _notify(on_change)


async def _read(path: Path, *, missing: bool) -> Fingerprint | None:
    """The tree's fingerprint, or None (logged once per outage) when it cannot be read."""
    try:
        return await asyncio.to_thread(fingerprint, path)
    except OSError as exc:
        if not missing:
            log.warning(
                "cannot read manifest directory %s (%s); watching for it to return",
                path,
                exc.strerror or exc,
            )
        return None


async def _stopped(stop: asyncio.Event, timeout: float) -> bool:
    if stop.is_set():
        return True
    try:
        await asyncio.wait_for(stop.wait(), timeout)
    except TimeoutError:
        return False
    return True


async def _notify(on_change: Callable[[], Awaitable[None] | None]) -> None:
    try:
        result = on_change()
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("manifest directory change handler failed")
