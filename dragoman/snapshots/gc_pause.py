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


def settle_for_serving() -> None:
    """Start-up is done: what it made lives as long as the process, so the collector never
    scans it again (frozen), and the collector runs less often from now on."""
    gc.freeze()
    gc.set_threshold(*SERVING_THRESHOLDS)
