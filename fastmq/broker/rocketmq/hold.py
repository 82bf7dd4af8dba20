"""The Hold service (seed 003, broker chapter 4.5; RocketMQ's PullRequestHoldService): long-polling pulls.

A PULL with the SUSPEND flag that finds nothing new is not answered at once: it waits, per (topic, queue), until
a message at or beyond its offset arrives or its suspendTimeoutMillis passes, and is then run again (and
answered, with whatever it finds). Clients that cannot long-poll would otherwise spin. Arrivals are announced by
the store on the appending thread; the held pulls run again on the I/O loop. A held pull of a connection that
closed is dropped. A connection holds at most MAX_HELD_PER_CONNECTION pulls (a consumer holds one per queue it
reads): beyond that a pull is answered at once, so that no client makes the broker keep requests without bound.
"""
from __future__ import annotations

from typing import Any, Callable

from fastmq.io import IOLoop, TimerHandle

MAX_HELD_PER_CONNECTION = 4096


class HeldPull:
    __slots__ = ("connection", "offset", "retry", "timer")

    def __init__(self, connection: Any, offset: int, retry: Callable[[], None]) -> None:
        self.connection = connection
        self.offset = offset
        self.retry = retry            # runs the pull again and answers it
        self.timer: TimerHandle | None = None


class PullHold:
    def __init__(self, loop: IOLoop) -> None:
        self.loop = loop
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._per_connection: dict[int, int] = {}     # id(connection) -> pulls it has held
        self._closed = False

    def hold(self, topic: str, queue_id: int, connection: Any, offset: int, timeout_s: float,
             retry: Callable[[], None]) -> bool:
        """Loop thread: run retry() when the queue's max offset passes `offset`, or after timeout_s. False (and
        nothing held) when the connection holds its maximum already."""
        if self._per_connection.get(id(connection), 0) >= MAX_HELD_PER_CONNECTION:
            return False
        self._per_connection[id(connection)] = self._per_connection.get(id(connection), 0) + 1
        pull = HeldPull(connection, offset, retry)
        key = (topic, queue_id)
        self._held.setdefault(key, []).append(pull)
        pull.timer = self.loop.call_later(max(0.0, timeout_s), lambda: self._release(key, pull))
        return True

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store's arrival listener (any thread)."""
        if (topic, queue_id) in self._held and not self._closed:
            self.loop.call_soon_threadsafe(self._arrived, (topic, queue_id), max_offset)

    def _arrived(self, key: tuple[str, int], max_offset: int) -> None:
        for pull in [pull for pull in self._held.get(key, ()) if pull.offset < max_offset]:
            self._release(key, pull)

    def _release(self, key: tuple[str, int], pull: HeldPull) -> None:
        pulls = self._held.get(key)
        if pulls is None or pull not in pulls:
            return
        pulls.remove(pull)
        if not pulls:
            del self._held[key]
        self._forget(pull)
        pull.retry()

    def _forget(self, pull: HeldPull) -> None:
        if pull.timer is not None:
            pull.timer.cancel()
        key = id(pull.connection)
        count = self._per_connection.get(key, 0) - 1
        if count > 0:
            self._per_connection[key] = count
        else:
            self._per_connection.pop(key, None)

    def connection_lost(self, connection: Any) -> None:
        for key, pulls in list(self._held.items()):
            for pull in [pull for pull in pulls if pull.connection is connection]:
                pulls.remove(pull)
                self._forget(pull)
            if not pulls:
                del self._held[key]

    @property
    def held(self) -> int:
        return sum(len(pulls) for pulls in self._held.values())

    def close(self) -> None:
        """Answer every held pull now (with what it finds), as the broker stops."""
        self._closed = True
        for key, pulls in list(self._held.items()):
            for pull in list(pulls):
                self._release(key, pull)
