"""Rate limits: a token bucket, as TubeMQ's consumer limits what it hands out per second."""
from __future__ import annotations

import time
from typing import Callable


class RateLimiter:
    """A token bucket: `rate` per second, bursts of up to one second's worth. Taking more than is there is
    allowed (a poll hands out whole records); the debt delays what follows."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError(f"a rate limit must be positive, not {rate!r}")
        self.rate = rate
        self.tokens = rate
        self._clock = clock
        self.updated = clock()

    def available(self) -> float:
        now = self._clock()
        self.tokens = min(self.rate, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        return self.tokens

    def take(self, amount: float) -> None:
        self.tokens -= amount

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` tokens are there (at most one second's worth is ever waited for)."""
        return max(0.0, (min(amount, self.rate) - self.tokens) / self.rate)
