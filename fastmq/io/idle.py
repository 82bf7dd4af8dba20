"""Idle-connection reaping (connections.max.idle.ms), the way Kafka's Selector does it.

Connections sit in an LRU ordered by their last read or write. Each check looks only at the least
recently used one: if it is not expired, none is, and the next check is due exactly when it would
expire. So there is no timer per connection and a check costs O(1), however many connections there are.
A connection awaiting a response is not idle, however long the peer takes: the check counts it as used
now (its request fails by request_timeout, never by being taken for idle).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Hashable, Protocol, TypeVar

from fastmq.io.errors import IdleConnectionClosedError
from fastmq.io.loop import IOLoop, TimerHandle

# Slack added to the check timer so that it fires strictly after the oldest connection's expiry
# (expiry is "idle for more than max_idle"), instead of spinning once at the exact instant.
_TIMER_SLACK = 0.001

KeyT = TypeVar("KeyT", bound=Hashable)


class IdleExpiry(Generic[KeyT]):
    """An LRU of keys by last activity time; poll_expired() inspects only the oldest entry."""

    __slots__ = ("max_idle", "_lru", "_next_check")

    def __init__(self, max_idle: float) -> None:
        self.max_idle = max_idle
        self._lru: OrderedDict[KeyT, float] = OrderedDict()
        self._next_check = 0.0

    def touch(self, key: KeyT, now: float) -> None:
        """Record activity on key at time now, making it the most recently used."""
        lru = self._lru
        lru[key] = now
        lru.move_to_end(key)

    def remove(self, key: KeyT) -> None:
        self._lru.pop(key, None)

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def next_check(self) -> float:
        """When poll_expired() next has something to look at (set by the last call)."""
        return self._next_check

    def poll_expired(self, now: float) -> KeyT | None:
        """The least recently used key if it has been idle for more than max_idle, else None."""
        if now <= self._next_check:
            return None
        if not self._lru:
            self._next_check = now + self.max_idle
            return None
        oldest_key, last_active = next(iter(self._lru.items()))
        self._next_check = last_active + self.max_idle
        return oldest_key if now > self._next_check else None


class Reapable(Protocol):
    """What the reaper needs of a stream (fastmq.io.stream.Stream is one): the expiry it touches on every
    read and write, whether it awaits a response, and close()."""

    idle_expiry: IdleExpiry[Reapable] | None

    @property
    def awaiting_response(self) -> bool: ...

    def close(self, error: BaseException | None = None) -> None: ...

    # The expiry's LRU is keyed by stream; mypy does not count object's __hash__ as a protocol's.
    def __hash__(self) -> int: ...


class IdleReaper:
    """Closes the streams of one owner (a pool, a listener) that stay idle longer than max_idle seconds.

    Streams call expiry.touch() on every read and write; one loop timer runs the checks.
    """

    def __init__(self, loop: IOLoop, max_idle: float) -> None:
        self._loop = loop
        self.expiry: IdleExpiry[Reapable] = IdleExpiry(max_idle)
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0

    def track(self, stream: Reapable) -> None:
        stream.idle_expiry = self.expiry
        self.expiry.touch(stream, self._loop.time())
        self._arm(self._loop.time() + self.expiry.max_idle)

    def untrack(self, stream: Reapable) -> None:
        self.expiry.remove(stream)
        stream.idle_expiry = None

    def _arm(self, when: float) -> None:
        if self._timer is not None and not self._timer.cancelled and self._timer_at <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when + _TIMER_SLACK, self._check)

    def _check(self) -> None:
        self._timer = None
        now = self._loop.time()
        expiry = self.expiry
        while (stream := expiry.poll_expired(now)) is not None:
            if stream.awaiting_response:
                expiry.touch(stream, now)
                continue
            expiry.remove(stream)
            stream.close(IdleConnectionClosedError(
                f"{stream} was idle for more than {expiry.max_idle * 1000:.0f} ms (connections_max_idle_ms)"))
        if len(expiry):
            self._arm(expiry.next_check)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
