from __future__ import annotations

from dragoman.xds.server.pacing import TokenBucket


def test_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(3, 10.0, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    assert bucket.delay() == 0.1
    now[0] = 0.1
    assert bucket.take() and not bucket.take()
    now[0] = 100.0
    assert sum(bucket.take() for _ in range(10)) == 3  # never more than the burst
