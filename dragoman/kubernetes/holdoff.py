"""When to rebuild after a burst of changes. Pure: the caller passes the time.

A change that comes at least `quiet` seconds after the last rebuild (after when it took its
input: `flushed`'s time) is applied at once; changes that follow a rebuild more closely are a
burst: they wait until the stream has been quiet for `quiet` seconds, but never longer than
`max_delay` after the first of them, so a steady trickle still gets applied. (Contour holds
off 100 ms after every rebuild; a quiet spell of 10 ms is enough to tell a lone change from a
burst, and the lone change is served 90 ms sooner.)
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
        return min(self._last + self.quiet, self._first + self.max_delay)

    def flushed(self, now: float) -> None:
        self._first = None
        self._last_flush = now
