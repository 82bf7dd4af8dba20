"""fastmq.client.ratelimit: the token bucket, on a clock the test moves."""
from __future__ import annotations

import pytest

from fastmq.client import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bursts_refill_and_debt():
    clock = Clock()
    limiter = RateLimiter(10, clock)
    assert limiter.available() == 10                # a second's worth to start with
    limiter.take(15)                                # a poll may overdraw
    assert limiter.available() == -5
    assert limiter.wait_for(1) == pytest.approx(0.6)
    clock.now += 0.6
    assert limiter.available() == pytest.approx(1)
    clock.now += 60
    assert limiter.available() == 10                # never more than one second's worth
    assert limiter.wait_for(1000) == 0.0            # asks beyond the burst wait for the burst only


def test_a_rate_must_be_positive():
    with pytest.raises(ValueError):
        RateLimiter(0)
