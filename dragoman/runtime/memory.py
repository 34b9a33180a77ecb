"""Handing memory freed after large responses back to the system.

A response of 10,000 resources is built, sent and freed, but glibc keeps the freed pages
(each arena's high-water mark, and gRPC's threads allocate from arenas of their own): every
Envoy that connects left megabytes of RSS behind that nothing used again. Once the server is
quiet after a build or after streams came or went, `malloc_trim` returns those pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
from collections.abc import Callable, Hashable

log = logging.getLogger("dragoman.runtime.memory")

# How long activity must be still before a trim: one interval (checked once per interval).
TRIM_INTERVAL_S = 2.0


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class MemoryTrimmer:
    """Trims once activity (any value that changes when builds happen or streams come and
    go) has been still for one interval: after the responses it caused were sent and freed,
    not while they are."""

    def __init__(
        self,
        activity: Callable[[], Hashable],
        interval: float = TRIM_INTERVAL_S,
        release: Callable[[], object] | None = None,
    ) -> None:
        """`release`: drops what is kept only to answer the activity of the moment (response
        bodies shared by streams), called just before each trim."""
        self.activity = activity
        self.interval = interval
        self.release = release
        self.trims = 0
        self._trim = _malloc_trim()

    async def run(self, stop: asyncio.Event) -> None:
        if self._trim is None:
            return
        trimmed: Hashable = object()  # what the start-up left behind is trimmed too
        previous: Hashable = object()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
            current = self.activity()
            if current == previous and current != trimmed:
                if self.release is not None:
                    self.release()
                await asyncio.to_thread(self._trim)
                self.trims += 1
                trimmed = current
            previous = current
