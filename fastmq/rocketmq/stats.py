"""A consumer's statistics per topic, as the Java client's ConsumerStatsManager reports them in
ConsumerRunningInfo's statusTable (GET_CONSUMER_RUNNING_INFO; `mqadmin consumerStatus` and the dashboard show it):

    {"topic": {"pullRT": ms per pull, "pullTPS": messages pulled per second, "consumeRT": ms per listener call,
               "consumeOKTPS": messages consumed per second, "consumeFailedTPS": messages failed per second,
               "consumeFailedMsgs": messages failed in the last hour}}

Rates and averages cover the last minute, as Java's do. Each topic keeps running totals and a snapshot of them
at most once a second (an hour of snapshots at the most): a rate is the difference between now and the oldest
snapshot of the window, divided by the time between them. Recording is a lock and a few additions: it runs once
per pull answer and once per listener call.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

MINUTE_S = 60.0
HOUR_S = 3600.0
SNAPSHOT_EVERY_S = 1.0

# the running totals of one topic, by index
PULLS, PULLED, PULL_RT_MS, CONSUME_CALLS, CONSUME_RT_MS, CONSUMED_OK, CONSUME_FAILED = range(7)


class _TopicStats:
    __slots__ = ("totals", "snapshots")

    def __init__(self, now: float) -> None:
        self.totals = [0.0] * 7
        self.snapshots: deque[tuple[float, list[float]]] = deque([(now, [0.0] * 7)])   # (time, totals then)


class ConsumeStats:
    """Thread-safe: the fetcher records pulls on the loop thread, the listener's pool records consumption."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._topics: dict[str, _TopicStats] = {}
        self._lock = threading.Lock()

    def pulled(self, topic: str, messages: int, rt_ms: float) -> None:
        """A pull answered after rt_ms with `messages` messages."""
        with self._lock:
            totals = self._topic(topic).totals
            totals[PULLS] += 1
            totals[PULLED] += messages
            totals[PULL_RT_MS] += rt_ms

    def consumed(self, topic: str, messages: int, ok: bool, rt_ms: float) -> None:
        """One listener call on `messages` messages took rt_ms; ok is False when they are to be consumed again."""
        with self._lock:
            totals = self._topic(topic).totals
            totals[CONSUME_CALLS] += 1
            totals[CONSUME_RT_MS] += rt_ms
            totals[CONSUMED_OK if ok else CONSUME_FAILED] += messages

    def _topic(self, topic: str) -> _TopicStats:
        now = self._clock()
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = _TopicStats(now)
        elif now - stats.snapshots[-1][0] >= SNAPSHOT_EVERY_S:
            stats.snapshots.append((now, list(stats.totals)))
            while now - stats.snapshots[0][0] > HOUR_S and len(stats.snapshots) > 1:
                stats.snapshots.popleft()
        return stats

    def status_table(self) -> dict[str, dict[str, float]]:
        """statusTable: ConsumeStatus per topic."""
        now = self._clock()
        table = {}
        with self._lock:
            for topic, stats in sorted(self._topics.items()):
                totals = stats.totals
                minute = _since(stats.snapshots, now - MINUTE_S)
                hour = _since(stats.snapshots, now - HOUR_S)
                elapsed = max(now - minute[0], SNAPSHOT_EVERY_S)
                delta = [total - before for total, before in zip(totals, minute[1])]
                table[topic] = {
                    "pullRT": delta[PULL_RT_MS] / delta[PULLS] if delta[PULLS] else 0.0,
                    "pullTPS": delta[PULLED] / elapsed,
                    "consumeRT": delta[CONSUME_RT_MS] / delta[CONSUME_CALLS] if delta[CONSUME_CALLS] else 0.0,
                    "consumeOKTPS": delta[CONSUMED_OK] / elapsed,
                    "consumeFailedTPS": delta[CONSUME_FAILED] / elapsed,
                    "consumeFailedMsgs": int(totals[CONSUME_FAILED] - hour[1][CONSUME_FAILED]),
                }
        return table


def _since(snapshots: deque[tuple[float, list[float]]], start: float) -> tuple[float, list[float]]:
    """The oldest snapshot taken at or after `start` (the newest one when all are older)."""
    for snapshot in snapshots:
        if snapshot[0] >= start:
            return snapshot
    return snapshots[-1]
