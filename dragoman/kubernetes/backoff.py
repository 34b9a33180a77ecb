"""Exponential backoff with jitter, for reconnecting to an API server that went away."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays that double from `initial` up to `maximum`, each shortened by up to `jitter`
    of itself so that replicas cut off together do not come back in lockstep."""

    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.2
    _next: float = field(default=0.0, init=False)

    def next(self, maximum: float | None = None) -> float:
        """The delay to wait before the next attempt; `maximum`, when given, caps this one
        delay (the doubling goes on underneath, for failures that are not capped)."""
        base = self._next or self.initial
        self._next = min(base * 2, self.maximum)
        if maximum is not None:
            base = min(base, maximum)
        return base * (1 - self.jitter * random.random())

    def reset(self) -> None:
        """Called after a success: the next failure waits `initial` again."""
        self._next = 0.0
