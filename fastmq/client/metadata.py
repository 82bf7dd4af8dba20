"""When to fetch the cluster's metadata, and waiting for a newer snapshot of it.

A client keeps a snapshot of its cluster (brokers, topics, partition leaders) and refreshes it:
- periodically, once it is max_age old;
- on demand, when something showed it is stale: a connection to a broker failed, a partition answered
  "not the leader" or "unknown", a producer has records for a topic it has no leaders for. Such requests
  coalesce: a refresh starts no sooner than min_interval after the previous one started;
- at once (or as soon as the one in flight is answered) when the client starts tracking topics it never asked
  for: nothing was stale, and nothing can be sent or fetched for them until they are known. The Java client
  does the same (Metadata.requestUpdateForNewTopics). Through min_interval, a kafka-python consumer, which
  fetches metadata at construction, waited 100 ms for its assigned topic's before its first fetch; the number
  of new topics bounds these refreshes;
- again and again while the last refresh failed or left something unresolved (a topic not created yet),
  with an exponential backoff with jitter between min_interval and the backoff's maximum, so that a dead
  broker costs one metadata request a second or so, not a busy loop;
- every min_interval while an answer names no reachable leader for a partition the client needs, for up
  to LEADER_WAIT seconds, then with the backoff. The cluster moves a dead broker's partitions when its
  session times out (9 s on Kafka's defaults), on its own schedule: asking every min_interval (librdkafka's
  fast leader query) finds the new leader within min_interval of the election, where a backoff grown to
  its maximum found it up to a second later, and every record of those partitions waited that second.

MetadataRefresh decides when (loop thread only); MetadataVersion counts snapshots and wakes the threads
waiting for a newer one.
"""
from __future__ import annotations

import threading
from typing import Callable

from fastmq.io import ReconnectBackoff

_MIN_BACKOFF = 0.01                         # seconds
# How long a missing leader is asked for every min_interval: beyond the session timeouts after which
# clusters move a dead broker's partitions (Kafka's KRaft 9 s, ZooKeeper 18 s); a partition still without a
# leader then waits for a broker to come back, and is asked for with the backoff.
LEADER_WAIT = 30.0


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
        self.new_topics = False             # the wanted refresh is for topics never asked for: due at once
        self.reason = "first metadata"
        self.in_flight = False
        self.failures = 0                   # refreshes in a row that failed or left something unresolved
        self.started_at: float | None = None
        self.succeeded_at: float | None = None
        self.leader_missing_since: float | None = None    # answers name no reachable leader since then
        self._next_delay = 0.0              # drawn once per failure, so that the jitter does not move the date

    def request(self, reason: str, *, new_topics: bool = False) -> bool:
        """Ask for a refresh soon (with new_topics, at once: see the module docstring); True when the refresh
        became due sooner (the caller may wake the loop)."""
        sooner = not self.wanted or (new_topics and not self.new_topics)
        self.wanted = True
        self.new_topics |= new_topics
        if sooner:
            self.reason = reason
        return sooner

    def delay(self, now: float) -> float | None:
        """Seconds until the next refresh should start (0: now); None while one is in flight."""
        if self.in_flight:
            return None
        due = float("inf") if self.succeeded_at is None else self.succeeded_at + self.max_age
        if self.wanted or self.failures:
            earliest = 0.0 if self.started_at is None or (self.new_topics and not self.failures) else (
                self.started_at + (self._next_delay if self.failures else self.min_interval))
            due = min(due, earliest)
        return max(0.0, due - now)

    def started(self, now: float) -> str:
        """A refresh was sent; returns why it was wanted (for the log)."""
        self.in_flight = True
        self.wanted = False
        self.new_topics = False
        self.started_at = now
        reason, self.reason = self.reason, "periodic refresh"
        return reason

    def failed(self, reason: str) -> None:
        """The refresh failed (no answer, or an unusable one): try again after a growing backoff."""
        self.in_flight = False
        self.failures += 1
        self._next_delay = self.backoff.delay(self.failures)
        self.reason = reason

    def succeeded(self, now: float, unresolved: str | None = None, *, leader_missing: bool = False) -> None:
        """An answer was applied. `unresolved` says what it left open (a topic not created yet, a partition
        without a reachable leader): then another refresh follows after a growing backoff, or after
        min_interval when leader_missing (a leader is being elected; see the module docstring)."""
        self.in_flight = False
        self.succeeded_at = now
        if unresolved is None or not leader_missing:
            self.leader_missing_since = None
        elif self.leader_missing_since is None:
            self.leader_missing_since = now
        if unresolved is None:
            self.failures = 0
            return
        if self.leader_missing_since is not None and now - self.leader_missing_since < LEADER_WAIT:
            self.failures = 1
            self._next_delay = max(self.min_interval, _MIN_BACKOFF)
            self.reason = unresolved
            return
        self.failed(unresolved)
