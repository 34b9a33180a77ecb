"""The rebuild holdoff: immediate after a quiet spell, then coalesced, with a maximum delay."""

from __future__ import annotations

import math

from dragoman.kubernetes.holdoff import Holdoff


def test_nothing_pending_is_never_due() -> None:
    holdoff = Holdoff()
    assert not holdoff.pending and holdoff.due() == math.inf


def test_a_change_after_a_quiet_spell_is_applied_at_once() -> None:
    holdoff = Holdoff(quiet=0.1, max_delay=0.5)
    holdoff.changed(10.0)
    assert holdoff.due() == 10.0
    holdoff.flushed(10.0)
    holdoff.changed(20.0)  # long after the last rebuild
    assert holdoff.due() == 20.0


def test_a_burst_waits_for_quiet_but_never_past_the_maximum_delay() -> None:
    holdoff = Holdoff(quiet=0.1, max_delay=0.5)
    holdoff.flushed(10.0)
    holdoff.changed(10.05)  # right after a rebuild: held off
    assert holdoff.due() == 10.05 + 0.1
    holdoff.changed(10.12)
    assert holdoff.due() == 10.12 + 0.1
    for step in range(1, 10):  # changes every 80 ms keep resetting the quiet period...
        holdoff.changed(10.12 + 0.08 * step)
    assert holdoff.due() == 10.05 + 0.5  # ...but the maximum delay caps it
    holdoff.flushed(10.55)
    assert not holdoff.pending


def test_a_quiet_spell_is_as_long_as_the_quiet_period() -> None:
    """A change coming one quiet period after the last rebuild is a lone change, not the tail
    of a burst: one new route after another each serve at once (not 100 ms later)."""
    holdoff = Holdoff()  # 10 ms of quiet by default
    holdoff.flushed(10.0)
    holdoff.changed(10.015)
    assert holdoff.due() == 10.015
    holdoff.flushed(10.016)
    holdoff.changed(10.02)  # 4 ms after: a burst
    assert holdoff.due() == 10.02 + holdoff.quiet


def test_a_change_after_the_last_rebuild_ended_by_half_its_time_is_applied_at_once() -> None:
    """A writer that waits for each change to be applied is not held, however soon within the
    quiet period it writes the next; one writing sooner after the rebuild than half the time
    the rebuild took is a burst."""
    holdoff = Holdoff(quiet=0.1, max_delay=0.5)
    holdoff.flushed(10.0)
    holdoff.finished(10.004)  # took 4 ms
    holdoff.changed(10.006)  # 2 ms after it ended, within the quiet period
    assert holdoff.due() == 10.006
    holdoff.flushed(10.009)
    holdoff.changed(10.010)  # while that rebuild runs: a burst
    assert holdoff.due() == 10.010 + 0.1
    holdoff.finished(10.013)
    assert holdoff.due() == 10.010 + 0.1  # (it came before the end)
    holdoff.flushed(10.2)
    holdoff.finished(10.25)  # took 50 ms
    holdoff.changed(10.27)  # 20 ms after: sooner than half of it
    assert holdoff.due() == 10.27 + 0.1
