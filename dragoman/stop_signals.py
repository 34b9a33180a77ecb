"""Waiting in the main thread for SIGTERM or SIGINT, with no lock taken in the handler.

A signal handler runs in the main thread between two bytecodes, even inside the handler of
an earlier signal. A handler that sets a `threading.Event` takes the Event's lock: a second
signal arriving while the first handler holds it (`timeout` signals make and then its whole
process group, two signals at once) deadlocks the process. The handler here only records
the signal; the main thread looks at short intervals.
"""

from __future__ import annotations

import signal
import time
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """Installed when made: from then on SIGTERM and SIGINT are recorded, not fatal."""

    def __init__(self) -> None:
        self.received: list[int] = []
        for number in STOP_SIGNALS:
            signal.signal(number, self._record)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)  # atomic: no lock

    def wait(self, poll_s: float = 0.2) -> None:
        """Until one of them arrives (a sleep of `poll_s` at most after it)."""
        while not self.received:
            time.sleep(poll_s)
