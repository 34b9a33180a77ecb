"""Handing memory freed after large responses back to the system.

A response of 10,000 resources is built, sent and freed, but glibc keeps the freed pages
(each arena's high-water mark, and gRPC's threads allocate from arenas of their own): every
Envoy that connects left megabytes of RSS behind that nothing used again. Once the server is
quiet after a build or after streams came or went, `malloc_trim` returns those pages. Streams
that close hand back what they held (a response queued for a client that never read) even
while other clients keep the server busy: once closes have stopped for an interval, at most
once per `CLOSE_TRIM_GAP_S`.

While it serves, large buffers come from the heap rather than each from a mapping of its own
(`serve_large_buffers_from_heap`): a SotW push of 10,000 clusters makes gRPC copy a 1.4 MB
response for each stream, and glibc mapped every copy afresh and unmapped it when written, so
that each one faulted in 350 zeroed pages: a third of the server's CPU per change. From the
heap, a freed buffer is reused with its pages; the trim of a quiet server still returns them.
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
# The least time between two trims made for closed streams while the server stays busy: a
# trim of a large heap takes milliseconds of a core, and clients that come and go all the
# time must not make it run at every interval.
CLOSE_TRIM_GAP_S = 10.0


# glibc's mallopt parameters, and the values set while serving. Allocations up to the largest
# mapping threshold glibc allows (32 MiB on 64-bit) come from the heap. Up to HEAP_SLACK_BYTES
# freed at its top stay there between trims: a push holds one copy per stream at once (14 MB
# for 10 Envoys), which would otherwise be handed back and faulted in again at the next push.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
LARGE_BUFFER_BYTES = 32 * 1024 * 1024
HEAP_SLACK_BYTES = 64 * 1024 * 1024


def _libc_function(name: str) -> Callable[..., int] | None:
    """A function of glibc, or None where the C library has none (musl, macOS)."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None
    return function


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return None
    return lambda: trim(ctypes.c_size_t(0))


def serve_large_buffers_from_heap() -> bool:
    """Large allocations from the heap, its freed top kept up to HEAP_SLACK_BYTES; whether
    the C library took both (glibc only). Only with a trimmer running: it returns them."""
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, HEAP_SLACK_BYTES)
    )


class MemoryTrimmer:
    """Trims once activity (any value that changes when builds happen or streams come and
    go) has been still for one interval: after the responses it caused were sent and freed,
    not while they are. With `closes` (how many streams have closed so far), also once
    streams have closed and no other has for an interval, however busy the server is, at
    most once per `close_gap`."""

    def __init__(
        self,
        activity: Callable[[], Hashable],
        interval: float = TRIM_INTERVAL_S,
        release: Callable[[], object] | None = None,
        closes: Callable[[], int] | None = None,
        close_gap: float = CLOSE_TRIM_GAP_S,
    ) -> None:
        """`release`: drops what is kept only to answer the activity of the moment (response
        bodies shared by streams), called just before each trim of a quiet server (not
        before a trim for closed streams: the server is still answering)."""
        self.activity = activity
        self.interval = interval
        self.release = release
        self.closes = closes
        self.close_gap = close_gap
        self.trims = 0
        self.close_trims = 0
        self._trim = _malloc_trim()

    async def run(self, stop: asyncio.Event) -> None:
        if self._trim is None:
            return
        if not serve_large_buffers_from_heap():
            log.debug("large buffers stay mapped one by one: mallopt refused")
        loop = asyncio.get_running_loop()
        trimmed: Hashable = object()  # what the start-up left behind is trimmed too
        previous: Hashable = object()
        closes = closes_trimmed = self._closes()
        last_trim = loop.time()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
            current, closes_before, closes = self.activity(), closes, self._closes()
            if current == previous and current != trimmed:
                if self.release is not None:
                    self.release()
                await self._trim_now()
                trimmed, closes_trimmed, last_trim = current, closes, loop.time()
            elif (
                closes == closes_before != closes_trimmed
                and loop.time() - last_trim >= self.close_gap
            ):
                await self._trim_now()
                self.close_trims += 1
                closes_trimmed, last_trim = closes, loop.time()
            previous = current

    def _closes(self) -> int:
        return self.closes() if self.closes is not None else 0

    async def _trim_now(self) -> None:
        assert self._trim is not None  # run() returns at once without one
        await asyncio.to_thread(self._trim)
        self.trims += 1
