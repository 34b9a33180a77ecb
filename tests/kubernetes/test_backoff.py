"""Backoff: delays double up to a cap, each shortened by at most `jitter` of itself, and
start over after a success."""

from __future__ import annotations

import pytest

from dragoman.kubernetes import backoff
from dragoman.kubernetes.backoff import Backoff


def test_delays_double_up_to_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff.random, "random", lambda: 0.0)  # no jitter drawn
    delays = Backoff(initial=0.5, maximum=5.0)
    assert [delays.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_jitter_only_shortens_and_by_at_most_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff.random, "random", lambda: 0.999999)
    delays = Backoff(initial=1.0, maximum=8.0, jitter=0.2)
    assert [round(delays.next(), 4) for _ in range(5)] == [0.8, 1.6, 3.2, 6.4, 6.4]


def test_jittered_delays_stay_within_bounds() -> None:
    delays = Backoff(initial=1.0, maximum=4.0, jitter=0.5)
    seen = [delays.next() for _ in range(200)]
    bases = [1.0, 2.0] + [4.0] * 198
    assert all(base * 0.5 <= delay <= base for delay, base in zip(seen, bases, strict=True))
    assert len({round(d, 6) for d in seen[2:]}) > 1  # replicas do not retry in lockstep


def test_reset_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff.random, "random", lambda: 0.0)
    delays = Backoff(initial=0.5, maximum=30.0)
    for _ in range(4):
        delays.next()
    delays.reset()
    assert [delays.next(), delays.next()] == [0.5, 1.0]


def test_a_capped_delay_stays_under_its_cap_while_the_doubling_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backoff.random, "random", lambda: 0.0)
    delays = Backoff(initial=0.5, maximum=30.0)
    assert [delays.next(2.0) for _ in range(6)] == [0.5, 1.0, 2.0, 2.0, 2.0, 2.0]
    assert delays.next() == 30.0  # an uncapped failure after them waits the full delay
