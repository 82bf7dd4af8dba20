"""When to fetch the cluster's metadata, and waiting for a newer snapshot of it.

A client keeps a snapshot of its cluster (brokers, topics, partition leaders) and refreshes it:
- periodically, once it is max_age old;
- on demand, when something showed it is stale: a connection to a broker failed, a partition answered
  "not the leader" or "unknown", a producer has records for a topic it has no leaders for. Such requests
  coalesce: a refresh starts no sooner than min_interval after the previous one started;
- again and again while the last refresh failed or left something unresolved (a partition without a
  reachable leader), with an exponential backoff with jitter between min_interval and the backoff's
  maximum, so that a dead broker costs one metadata request a second or so, not a busy loop.

MetadataRefresh decides when (loop thread only); MetadataVersion counts snapshots and wakes the threads
waiting for a newer one.
"""
from __future__ import annotations

import threading
from typing import Callable

from fastmq.io import ReconnectBackoff

_MIN_BACKOFF = 0.01                         # seconds


class MetadataVersion:
    """A snapshot's version: incremented by every update, with waiters woken on each one (any thread)."""

    def __init__(self) -> None:
        self.version = 0                    # incremented by every update
        self.updated_at = 0.0               # monotonic time of the last update
        self._changed = threading.Condition()

    def publish(self, now: float, apply: Callable[[], None]) -> None:
        """Run apply() (which replaces the snapshot's fields) and wake the waiters, as one step."""
        with self._changed:
            apply()
            self.version += 1
            self.updated_at = now
            self._changed.notify_all()

    def wait_for_version(self, version: int, timeout: float | None) -> bool:
        """Wait until an update newer than `version` arrived; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self.version > version, timeout)

    def wake(self) -> None:
        """Wake waiters without an update (e.g. the client is closing)."""
        with self._changed:
            self._changed.notify_all()


class MetadataRefresh:
    """The refresh schedule of one client (loop thread only; see the module docstring)."""

    def __init__(self, max_age: float, min_interval: float, max_backoff: float, *,
                 backoff: ReconnectBackoff | None = None) -> None:
        if max_age <= 0 or min_interval < 0 or max_backoff < 0:
            raise ValueError("the metadata max age must be positive and the intervals not negative")
        self.max_age = max_age
        self.min_interval = min_interval
        # Doubling from min_interval after each failed or unresolved refresh, up to max_backoff; never from
        # less than _MIN_BACKOFF, so that a min_interval of 0 cannot make a loop of failing refreshes.
        self.backoff = backoff if backoff is not None else ReconnectBackoff(
            max(min_interval, _MIN_BACKOFF) * 1000.0, max(max_backoff, _MIN_BACKOFF) * 1000.0)
        self.wanted = True                  # the first refresh is due at once
        self.reason = "first metadata"
        self.in_flight = False
        self.failures = 0                   # refreshes in a row that failed or left something unresolved
        self.started_at: float | None = None
        self.succeeded_at: float | None = None
        self._next_delay = 0.0              # drawn once per failure, so that the jitter does not move the date

    def request(self, reason: str) -> bool:
        """Ask for a refresh soon; True when none was wanted before (the caller may wake the loop)."""
        if self.wanted:
            return False
        self.wanted = True
        self.reason = reason
        return True

    def delay(self, now: float) -> float | None:
        """Seconds until the next refresh should start (0: now); None while one is in flight."""
        if self.in_flight:
            return None
        due = float("inf") if self.succeeded_at is None else self.succeeded_at + self.max_age
        if self.wanted or self.failures:
            earliest = 0.0 if self.started_at is None else self.started_at + (
                self._next_delay if self.failures else self.min_interval)
            due = min(due, earliest)
        return max(0.0, due - now)

    def started(self, now: float) -> str:
        """A refresh was sent; returns why it was wanted (for the log)."""
        self.in_flight = True
        self.wanted = False
        self.started_at = now
        reason, self.reason = self.reason, "periodic refresh"
        return reason

    def failed(self, reason: str) -> None:
        """The refresh failed (no answer, or an unusable one): try again after a growing backoff."""
        self.in_flight = False
        self.failures += 1
        self._next_delay = self.backoff.delay(self.failures)
        self.reason = reason

    def succeeded(self, now: float, unresolved: str | None = None) -> None:
        """An answer was applied. `unresolved` says what it left open (a partition without a reachable
        leader, a topic not created yet): then another refresh follows after a growing backoff."""
        self.in_flight = False
        self.succeeded_at = now
        if unresolved is None:
            self.failures = 0
            return
        self.failed(unresolved)
