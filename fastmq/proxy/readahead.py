"""Read-ahead per queue: a pull brings more messages than its request hands out, and the next request of that
queue (the next lock, usually from the offset just acked) is answered from them without asking the broker.
A broker answers one small fetch about as slowly as a large one, so this is what lets many consumers that take
a few messages each go fast. Messages at an offset never change, so a run may be served until it is MAX_AGE_S
old (which bounds how long memory is held, and how stale the end offset it carries may be); one run per queue.
A run may hold the backend's own records (anything with an `offset`) with a function that makes a PulledMessage
of one: only the messages handed out are converted, not the hundreds a large pull brings."""
from __future__ import annotations

import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Callable

from fastmq.proxy.backend import PulledMessage, PullResult

MAX_AGE_S = 5.0


@dataclass
class _Run:
    first: int                      # the offset the pull asked for
    offsets: list[int]              # of messages, ascending
    messages: list[Any]             # PulledMessage, or what `convert` makes one of
    next_offset: int                # the offset after the run (past markers at its end)
    high: int
    at: float
    convert: Callable[[Any], PulledMessage] | None


class ReadAhead:
    def __init__(self, max_age_s: float = MAX_AGE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self._clock = clock
        self._runs: dict[tuple[str, str], _Run] = {}
        self.hits = 0

    def keep(self, topic: str, queue: str, first: int, messages: list[Any], next_offset: int, high: int,
             convert: Callable[[Any], PulledMessage] | None = None) -> None:
        self._runs[(topic, queue)] = _Run(first, [m.offset for m in messages], messages, next_offset, high,
                                          self._clock(), convert)

    def take(self, topic: str, queue: str, offset: int, max_messages: int) -> PullResult | None:
        """Up to max_messages from `offset` on, or None when the run of that queue does not cover it."""
        run = self._runs.get((topic, queue))
        if run is None or not run.first <= offset < run.next_offset:
            return None
        if self._clock() - run.at > self.max_age_s:
            del self._runs[(topic, queue)]
            return None
        start = bisect_left(run.offsets, offset)
        chosen = run.messages[start:start + max_messages]
        if run.convert is not None:
            chosen = [run.convert(m) for m in chosen]
        self.hits += 1
        if start + max_messages < len(run.messages):
            return PullResult(chosen, chosen[-1].offset + 1, run.high)
        return PullResult(chosen, run.next_offset, run.high)
