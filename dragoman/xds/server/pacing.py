"""A token bucket: how long a stream waits before it may read or answer again."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """`burst` tokens at first, refilled at `rate` per second up to `burst`."""

    def __init__(self, burst: int, rate: float, clock: Callable[[], float] = time.monotonic):
        self._burst = float(burst)
        self._rate = rate
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def delay(self) -> float:
        """Seconds until a token is available (0: one is)."""
        self._refill()
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self._rate

    def take(self) -> bool:
        """Take a token if one is available."""
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
