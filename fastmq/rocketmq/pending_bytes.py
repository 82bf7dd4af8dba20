"""The producer's bound on the bytes of its unfinished sends (Java's backPressureForAsyncSendSize, 100 MiB).

Every send reserves its request's size before the request is handed to the client's I/O thread: a sync, async or
batch send until it is answered or has failed, a oneway send until its bytes are written to the socket (it is
never answered). A caller whose request does not fit waits until earlier sends finish, for at most the send's
timeout, then gets SendBufferFullError; the memory that sends queued in the client can hold is so bounded whatever
the rate the broker takes them at. One request larger than the whole bound still goes when nothing else is
pending, so that no send can wait forever.
"""
from __future__ import annotations

import threading
import time

from fastmq.rocketmq.errors import RocketMQError

DEFAULT_MAX_PENDING_BYTES = 100 * 1024 * 1024


class SendBufferFullError(RocketMQError):
    """The producer's unfinished sends held max_pending_bytes for the whole send timeout."""

    retriable = True


class PendingBytes:
    """Bytes reserved by unfinished sends, within a limit; reserve() from callers, release() from any thread."""

    __slots__ = ("limit", "used", "_lock", "_freed", "_waiting")

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"max_pending_bytes must be positive, got {limit}")
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._waiting = 0

    def reserve(self, size: int, deadline: float) -> None:
        """Take size bytes, waiting until monotonic time `deadline` for room; raises SendBufferFullError."""
        with self._lock:
            if self.used + size <= self.limit or self.used == 0:
                self.used += size
                return
            self._waiting += 1
            try:
                while self.used + size > self.limit and self.used:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SendBufferFullError(
                            f"the producer's unfinished sends hold {self.used} bytes (max_pending_bytes "
                            f"{self.limit}) and a {size}-byte request found no room within its send timeout")
                    self._freed.wait(remaining)
                self.used += size
            finally:
                self._waiting -= 1

    def release(self, size: int) -> None:
        with self._lock:
            self.used -= size
            if self._waiting:
                self._freed.notify_all()
