"""The cyclic garbage collector: paused while snapshots are made, so that it does not scan
what is being made, and set for serving once start-up is done."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """A build allocates hundreds of thousands of acyclic frozen values; the cyclic collector
    would scan them again and again for nothing (about 40% of a 10,000-Service build).
    Reference counting still frees them; cycles made meanwhile are collected afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# The youngest generation's threshold while serving. Pushing one change to one stream
# allocates tens of container objects (futures, frames, lists), nearly all freed by reference
# counting. At Python's default (700) a change pushed to 10,000 streams ran the collector
# hundreds of times, and its older generations walked every stream's state: a quarter of the
# push's CPU at 2,000 streams. The rare cycles then wait for 50,000 allocations (at most a
# few MB); the older generations keep their ratios, a little wider.
SERVING_THRESHOLDS = (50_000, 20, 20)
# Objects a change pushed to one stream keeps alive until its write completes and its ACK is
# read (the write's task, coroutine and futures, the response, the request): about 20. The
# youngest generation's threshold stays above what a push to every connected stream keeps
# alive at once, so that a push runs no collection that walks them all for nothing: at
# 10,000 streams, four collections of 70 ms each per change at 50,000. Cycles then wait for
# 300,000 allocations there (tens of MB at most).
IN_FLIGHT_PER_STREAM = 30

_serving = False
_streams = 0


def settle_for_serving() -> None:
    """Start-up is done: what it made lives as long as the process, so the collector never
    scans it again (frozen), and the collector runs less often from now on."""
    global _serving
    gc.freeze()
    _serving = True
    gc.set_threshold(*serving_thresholds(_streams))


def serving_thresholds(streams: int) -> tuple[int, int, int]:
    """The collector's thresholds while serving `streams` streams."""
    youngest, middle, oldest = SERVING_THRESHOLDS
    return max(youngest, IN_FLIGHT_PER_STREAM * streams), middle, oldest


def fit_to_streams(streams: int) -> None:
    """`streams` are connected now: once serving, the youngest generation's threshold follows."""
    global _streams
    _streams = streams
    if _serving:
        thresholds = serving_thresholds(streams)
        if gc.get_threshold() != thresholds:
            gc.set_threshold(*thresholds)
