# cython: language_level=3
"""The bytes of a RocketMQ client's unfinished requests, within a bound (Java's backPressureForAsyncSendSize,
100 MiB), and the connection callbacks that give them back.

A send reserves its request's size when the caller hands it to the remoting client (RemotingClient.invoke_frame
with hold_until): a request that is answered holds it until its answer or failure, a oneway request until its
bytes are written to the socket (it is never answered). A caller whose request does not fit waits until earlier
ones finish, at most until its send's deadline, then gets SendBufferFullError; so the memory that requests queued
in the client can hold is bounded whatever the rate the broker takes them at. One request larger than the whole
bound still goes when nothing else is pending, so that no send can wait forever.

Compiled because every send passes here twice, once on the caller's thread (reserve) and once on the I/O thread
(the callback and its release): the counters are C fields changed while the GIL is held, so that a reservation
that fits and every release take no lock; the lock and its Condition are for callers that wait for room.
"""
cimport cython

import logging
import threading
import time

from fastmq.rocketmq.errors import SendBufferFullError

from fastmq.rocketmq._native.remoting import decode_command

DEFAULT_MAX_PENDING_BYTES = 100 * 1024 * 1024

_log = logging.getLogger("fastmq.rocketmq.remoting")


@cython.final
cdef class PendingBytes:
    """Bytes reserved by unfinished requests, within a limit. Callers reserve(); the client's I/O thread alone
    release()s finished ones."""

    cdef readonly long long limit
    cdef readonly long long reserved       # bytes ever reserved
    cdef readonly long long released       # bytes ever released
    cdef object _lock
    cdef object _freed
    cdef readonly int waiting               # callers waiting for room (changed under the lock)

    def __init__(self, long long limit):
        if limit <= 0:
            raise ValueError(f"max_pending_bytes must be positive, got {limit}")
        self.limit = limit
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)

    @property
    def used(self) -> int:
        return self.reserved - self.released

    cdef inline bint _fits(self, long long size) noexcept:
        cdef long long used = self.reserved - self.released
        return used + size <= self.limit or used == 0

    def reserve(self, long long size, double deadline):
        """Take size bytes, waiting until monotonic time `deadline` for room; raises SendBufferFullError."""
        if self._fits(size):            # no Python code runs between the test and the update: the GIL's
            self.reserved += size       # atomicity is the lock
            return
        with self._lock:
            self.waiting += 1          # before looking again: a release after this notifies
            try:
                while not self._fits(size):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SendBufferFullError(
                            f"the client's unfinished requests hold {self.reserved - self.released} bytes "
                            f"(max_pending_bytes {self.limit}) and a {size}-byte request found no room within its "
                            f"send timeout")
                    self._freed.wait(remaining)
                self.reserved += size
            finally:
                self.waiting -= 1

    def release(self, long long size):
        """A request is finished (the I/O thread only)."""
        self.release_bytes(size)

    cdef int release_bytes(self, long long size) except -1:
        self.released += size
        if self.waiting:
            with self._lock:
                self._freed.notify_all()
        return 0


cdef class Holding:
    """A connection callback that first gives back the bytes its request(s) held (target: what the subclass
    calls)."""

    cdef readonly object target
    cdef PendingBytes pending
    cdef long long held

    def __cinit__(self, target, PendingBytes pending not None, long long held):
        self.target = target
        self.pending = pending
        self.held = held

    cdef inline int give_back(self) except -1:
        if self.held:
            self.pending.release_bytes(self.held)
        return 0


@cython.final
cdef class DecodingCallback(Holding):
    """The callback of a request with a response: decodes the response frame for its ResponseCallback (target)."""

    def __call__(self, frame, error):
        self.give_back()
        callback = self.target
        if callback is None:
            return
        if error is not None:
            callback(None, error)
            return
        try:
            command = decode_command(frame)
        except Exception as exc:
            callback(None, exc)
            return
        callback(command, None)


@cython.final
cdef class FrameCallback(Holding):
    """The callback of a request whose caller decodes the response itself (invoke_frame's decode=False): the
    frame as read for its ResponseCallback (target)."""

    def __call__(self, frame, error):
        self.give_back()
        if self.target is not None:
            self.target(frame, error)


@cython.final
cdef class Written(Holding):
    """The callback of oneway requests written as one: each request's callback(None, error) (target: a list)."""

    def __call__(self, _frame, error):
        self.give_back()
        for callback in self.target:
            try:
                callback(None, error)
            except Exception:
                _log.exception("RocketMQ oneway callback failed")
