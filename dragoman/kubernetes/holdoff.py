"""When to rebuild after a burst of changes. Pure: the caller passes the time.

A change is applied at once when it comes at least `quiet` seconds after the last rebuild
began (after when it took its input: `flushed`'s time), or after the last rebuild ended
(`finished`) by at least half as long as that rebuild took: a writer that waits for each
change to be applied before the next is not held, and rebuilds of such changes take at most
two thirds of the time. Changes that follow a rebuild more closely are a burst: they wait
until the stream has been quiet for `quiet` seconds, but never longer than `max_delay` after
the first of them, so a steady trickle still gets applied. (Contour holds off 100 ms after
every rebuild; a quiet spell of 10 ms is enough to tell a lone change from a burst, and the
lone change is served 90 ms sooner.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Holdoff:
    quiet: float = 0.01
    max_delay: float = 0.5
    _first: float | None = field(default=None, init=False)
    _last: float = field(default=0.0, init=False)
    _last_flush: float = field(default=-math.inf, init=False)
    # When the last rebuild ended (inf while one runs) and how long it took.
    _last_end: float = field(default=-math.inf, init=False)
    _took: float = field(default=0.0, init=False)

    @property
    def pending(self) -> bool:
        return self._first is not None

    def changed(self, now: float) -> None:
        if self._first is None:
            self._first = now
        self._last = now

    def due(self) -> float:
        """When the pending changes should be applied; inf when none are pending."""
        if self._first is None:
            return math.inf
        if self._first - self._last_flush >= self.quiet:
            return self._first  # the first change after a quiet spell
        if self._first - self._last_end >= self._took / 2:
            return self._first  # after the last rebuild, by half as long as it took
        return min(self._last + self.quiet, self._first + self.max_delay)

    def flushed(self, now: float, ended: float | None = None) -> None:
        """A rebuild took its input at `now`; it ended at `ended` (None: it runs still, until
        `finished` says)."""
        self._first = None
        self._last_flush = now
        self._last_end = math.inf
        if ended is not None:
            self.finished(ended)

    def finished(self, now: float) -> None:
        """The rebuild that took its input at the last `flushed` has ended."""
        self._last_end = now
        self._took = max(0.0, now - self._last_flush)
