"""The bound on the bytes of a RocketMQ client's unfinished requests (Java's backPressureForAsyncSendSize, 100 MiB).

A send reserves its request's size when the caller hands it to the remoting client (RemotingClient.invoke_frame
with hold_until): a request that is answered holds it until its answer or failure, a oneway request until its
bytes are written to the socket (it is never answered). A caller whose request does not fit waits until earlier
ones finish, at most until its send's deadline, then gets SendBufferFullError; so the memory that requests queued
in the client can hold is bounded whatever the rate the broker takes them at. One request larger than the whole
bound still goes when nothing else is pending, so that no send can wait forever.
"""
from __future__ import annotations

import threading
import time

from fastmq.rocketmq.errors import SendBufferFullError

DEFAULT_MAX_PENDING_BYTES = 100 * 1024 * 1024


class PendingBytes:
    """Bytes reserved by unfinished requests, within a limit. Callers reserve(); the client's I/O thread alone
    release()s finished ones, without a lock: the bytes in use are the callers' running total less the I/O
    thread's, each counter written by one side only, so that a release costs the I/O thread no lock."""

    __slots__ = ("limit", "reserved", "released", "_lock", "_freed", "_waiting")

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"max_pending_bytes must be positive, got {limit}")
        self.limit = limit
        self.reserved = 0       # bytes ever reserved (callers, under the lock)
        self.released = 0       # bytes ever released (the I/O thread only)
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._waiting = 0

    @property
    def used(self) -> int:
        return self.reserved - self.released

    def reserve(self, size: int, deadline: float) -> None:
        """Take size bytes, waiting until monotonic time `deadline` for room; raises SendBufferFullError."""
        with self._lock:
            used = self.reserved - self.released
            if used + size <= self.limit or used == 0:
                self.reserved += size
                return
            self._waiting += 1          # before looking again: a release after this notifies
            try:
                while True:
                    used = self.reserved - self.released
                    if used + size <= self.limit or used == 0:
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SendBufferFullError(
                            f"the client's unfinished requests hold {used} bytes (max_pending_bytes "
                            f"{self.limit}) and a {size}-byte request found no room within its send timeout")
                    self._freed.wait(remaining)
                self.reserved += size
            finally:
                self._waiting -= 1

    def release(self, size: int) -> None:
        """A send is finished (the I/O thread only)."""
        self.released += size
        if self._waiting:
            with self._lock:
                self._freed.notify_all()
