# cython: language_level=3
"""The producer accumulator's buffer memory (accumulator.pyx); the accumulator's lock is held by every caller.

A batch reserves buffer memory for what it holds, growing its reservation in steps as records arrive (up to
batch_size), so thousands of partitions with a little data each do not pre-reserve partitions x batch_size: the
reservations are what buffer_memory bounds, exactly. The bytes themselves come from an Arena (arena.pyx): blocks of
one mapping, reused as batches finish, so a busy producer writes into memory that is mapped already, on huge
pages. A batch's block is at most twice what it holds (it doubles as it grows), so the arena spans twice
buffer_memory; only the blocks ever used become resident, and a block it has no room for is malloc'd.
"""
import threading

cimport cython

from fastmq._native.arena cimport Arena
from fastmq._native.producer_batch cimport ProducerBatch


# Waiting sends are woken once 1/WAKE_SHARE of buffer_memory is free.
cdef Py_ssize_t WAKE_SHARE = 8


@cython.final
cdef class BufferMemory:
    """The bytes reserved by unfinished batches, within buffer_memory, and the arena of their storage."""

    def __cinit__(self, Py_ssize_t buffer_memory, Py_ssize_t batch_size, object lock):
        self.buffer_memory = buffer_memory
        self.arena = Arena(2 * buffer_memory, batch_size)
        self.freed = threading.Condition(lock)

    cdef bint try_reserve(self, Py_ssize_t need) except -1:
        # Reserves `need` bytes if they fit (or nothing else is reserved: a record larger than buffer_memory
        # still goes out alone); False when memory is short.
        if self.used + need <= self.buffer_memory or self.used == 0:
            self.used += need
            return True
        return False

    cdef int release(self, Py_ssize_t amount) except -1:
        # Gives back memory reserved for nothing.
        self.used -= amount
        self.wake_waiters()
        return 0

    cdef int give_back(self, ProducerBatch batch) except -1:
        # A batch is done: its reservation returns, and its storage to the arena (once no write refers to it).
        self.used -= batch.reserved
        batch.reserved = 0
        batch.release_storage()
        self.wake_waiters()
        return 0

    cdef inline int wake_waiters(self) except -1:
        # Condition.notify_all is Python code: every finished batch would pay for it, so it runs only when a
        # send waits (a waiter is counted, under the lock, before it waits). And only once a share of the memory
        # is free (WAKE_SHARE), or no answer due will free more: a send blocked on a full buffer, woken for each
        # finished batch, appended one batch's worth and blocked again, two thread switches a batch on each side.
        if self.waiting and (self.in_flight == 0
                             or self.buffer_memory - self.used >= self.buffer_memory // WAKE_SHARE):
            self.freed.notify_all()
        return 0
