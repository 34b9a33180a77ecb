"""Waiting for SIGTERM or SIGINT: two signals at once (as `timeout` sends them to make and to
its process group) end the wait like one, and the process exits."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.support.processes import reaped

WAITER = """
import sys
from dragoman.stop_signals import StopSignals
stop = StopSignals()
print("ready", flush=True)
stop.wait(0.05)
print("stopped by", stop.received[0], flush=True)
"""


def test_two_signals_at_once_end_the_wait_like_one() -> None:
    for attempt in range(5):
        waiter = subprocess.Popen([sys.executable, "-c", WAITER], stdout=subprocess.PIPE, text=True)
        with reaped(waiter) as process:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
            sent = (signal.SIGTERM, signal.SIGINT if attempt % 2 else signal.SIGTERM)
            for number in sent:
                process.send_signal(number)
            assert process.wait(timeout=10) == 0
            # Two pending at once are delivered lowest number first.
            assert process.stdout.read() in {f"stopped by {int(number)}\n" for number in sent}
