"""Retry policy: which failures are worth another attempt (a hook each protocol supplies), how long to wait
before it (exponential backoff with jitter), and when to stop (attempts and a deadline)."""
from __future__ import annotations

from typing import Callable

from fastmq.io import ReconnectBackoff


class RetryPolicy:
    """`retriable(error)` classifies failures (the protocol's hook); attempts are counted from 1."""

    def __init__(self, retriable: Callable[[BaseException], bool], *, backoff_ms: float,
                 backoff_max_ms: float | None = None, max_attempts: float = float("inf"),
                 backoff: ReconnectBackoff | None = None) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.retriable = retriable
        self.max_attempts = max_attempts
        self.backoff = backoff if backoff is not None else ReconnectBackoff(
            backoff_ms, backoff_ms if backoff_max_ms is None else backoff_max_ms)

    def next_delay(self, error: BaseException, attempts: int, now: float,
                   deadline: float = float("inf")) -> float | None:
        """After `attempts` attempts, the last ending in `error`: seconds to wait before the next one, or
        None to give up (not retriable, out of attempts, or the backoff would end past the deadline)."""
        if attempts >= self.max_attempts or not self.retriable(error):
            return None
        delay = self.backoff.delay(attempts)
        return delay if now + delay < deadline else None
