"""What makes one stream's loop run again: a request arrived or the client's side ended (its
reader), the snapshots changed (the cache), the client's clusters warmed (make-before-break),
or a rate delay ended. Nothing waits per stream but the loop itself, on one future: at
10,000 streams a change costs one wake-up each, not tasks made and cancelled (nor, as with
asyncio.Event, a look-up of the running loop, which is a system call on Python 3.11)."""

from __future__ import annotations

import asyncio


class Wakeup:
    __slots__ = ("_loop", "_waiter", "rung", "warmed")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self.rung = False
        self.warmed = False  # the client's clusters warmed since the loop last looked

    def ring(self) -> None:
        self.rung = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def warm(self) -> None:
        self.warmed = True
        self.ring()

    def take_warmed(self) -> bool:
        warmed, self.warmed = self.warmed, False
        return warmed

    async def wait(self, timeout_s: float | None = None) -> None:
        """Until a ring, or `timeout_s` passes. The caller sets `rung` False before it looks
        at what is due, so a ring while it looks is not lost."""
        if self.rung:
            return
        waiter = self._waiter = self._loop.create_future()
        timer = None if timeout_s is None else self._loop.call_later(timeout_s, self.ring)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
