"""The pace of a producer's oneway sends: they go no faster than the broker takes them from its send queue.

A oneway request has no answer, so nothing else would slow a caller that sends faster than the broker stores.
Apache's broker puts every SEND request in one bounded queue (sendThreadPoolQueueCapacity, 10000) that its send
threads (sendMessageThreadPoolNums, min(cores, 4)) drain. A request that finds the queue full is dropped: its
RejectedExecutionException is answered [OVERLOAD] SYSTEM_BUSY, which a oneway request never gets. One that waits
longer than waitTimeMillsInSendQueue (200 ms) is taken out by the fast-failure cleaner ([TIMEOUT_CLEAN_QUEUE]).
Either way the message is lost without a word (remoting.py counts the cleaner's answers): unpaced 50,000-message
bursts of fastmq's oneway sends lost 2-40% against the bench's broker (loaded machine).

So every CONFIRM_EVERY-th oneway send to a broker address goes as an answered send (the user's own message, in one
attempt). The broker reads a connection's requests in order and queues them in that order on the
same send executor, whose queue is FIFO; so when that send is answered, every earlier request of the connection
has left the queue (processed, or being processed by the other send thread). At most WINDOW such confirmations
are unanswered at a time: the send that would start one more waits for the oldest answer, at most until its send
deadline (then it goes anyway: a broker that does not answer is no reason to fail a oneway call). A producer thus
has at most about (WINDOW + 1) * CONFIRM_EVERY requests in the broker's queue, some 33 ms of its work at 50k/s,
whatever rate its callers offer; fewer when the broker is slow (a slow answer halves the window, OnewayPace). The
embedded broker handles a connection's requests one at a time on its loop thread, so the same rule holds there.
Sync and async sends do not go through here.
"""
from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future
from functools import partial
from typing import Any, Callable

CONFIRM_EVERY = 128     # oneway sends per answered one: the answer costs the loop a decode and a callback
WINDOW = 12             # unanswered confirmations per address at most: ~1700 requests queued, ~33 ms at 50k/s
SLOW_ANSWER = 0.1       # s: a confirmation answered later than this halves its address's window (at least 1)


class _Address:
    """One broker address's pace."""

    __slots__ = ("sends", "unanswered", "window")

    def __init__(self, window: int) -> None:
        self.sends = itertools.count(1)     # next() is one C call under the GIL: no lock on the common path
        self.unanswered = 0                 # confirmations sent and not yet answered (under the pace's lock)
        self.window = window                # how many may be: halved by a slow answer, grown by one by a quick one


class OnewayPace:
    """Per broker address: how many oneway sends so far, how many confirmations unanswered, how many may be.

    The window adapts to how long the broker's queue makes a confirmation wait: a broker that stores slowly (a
    cold JIT, a loaded machine) would otherwise keep a full window's requests queued past Apache's 200 ms. It
    starts at one confirmation (CONFIRM_EVERY * 2 requests queued at most); each answer within SLOW_ANSWER grows it
    by one, up to `window`, and a later one halves it (down to one). Starting at the full window, a cold broker
    (3.5k messages/s) had 1721 of the first 10000 requests wait over 200 ms before the first slow answer came."""

    def __init__(self, confirm_every: int = CONFIRM_EVERY, window: int = WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if confirm_every < 1 or window < 1:
            raise ValueError("confirm_every and window must be at least 1")
        self.confirm_every = confirm_every
        self.window = window
        self._clock = clock
        self._condition = threading.Condition(threading.Lock())
        self._addresses: dict[str, _Address] = {}

    def confirmation(self, address: str, deadline: float) -> Callable[[Future[Any]], None] | None:
        """Called for each oneway send to address: None to send it oneway, or the callback that the send's answer
        (its Future, done) must reach, when this one goes as an answered send. Waits while the window's
        confirmations are unanswered, at most until deadline (a time of the clock)."""
        state = self._addresses.get(address)
        if state is None:
            state = self._addresses.setdefault(address, _Address(1))
        if next(state.sends) % self.confirm_every:
            return None
        with self._condition:
            while state.unanswered >= state.window:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                self._condition.wait(remaining)
            state.unanswered += 1
        return partial(self._answered, state, self._clock())

    def unanswered(self, address: str) -> int:
        state = self._addresses.get(address)
        return state.unanswered if state is not None else 0

    def window_of(self, address: str) -> int:
        state = self._addresses.get(address)
        return state.window if state is not None else self.window

    def _answered(self, state: _Address, sent_at: float, done: Future[Any]) -> None:
        # A send that failed without the broker's answer (a connection lost: no error code) says nothing of its
        # queue: the window stays as it is, and waiting callers go on.
        error = done.exception()
        learned = error is None or getattr(error, "code", None) is not None
        slow = self._clock() - sent_at > SLOW_ANSWER
        with self._condition:
            state.unanswered -= 1
            if learned and slow:
                state.window = max(1, state.window // 2)
            elif learned and state.window < self.window:
                state.window += 1
            self._condition.notify_all()
