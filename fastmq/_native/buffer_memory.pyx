# cython: language_level=3
"""The producer accumulator's buffer memory (accumulator.pyx); the accumulator's lock is held by every caller.

A batch reserves buffer memory for what it holds, growing its reservation in steps as records arrive (up to
batch_size), so thousands of partitions with a little data each do not pre-reserve partitions x batch_size. A
done batch that grew to batch_size passes its storage on to a later batch (BufferPool), as the Java client's
BufferPool does, so a busy producer writes into memory that is already mapped. Idle pooled storage counts
against buffer_memory (as the batch_size it reserved) and is freed first when memory is needed otherwise.
"""
import threading

cimport cython

from fastmq._native.buffer cimport BufferPool
from fastmq._native.producer_batch cimport ProducerBatch


@cython.final
cdef class BufferMemory:
    """The bytes reserved by unfinished batches, within buffer_memory, and the pool of finished batches'
    storage."""

    def __cinit__(self, Py_ssize_t buffer_memory, Py_ssize_t batch_size, object lock):
        self.buffer_memory = buffer_memory
        self.batch_size = batch_size
        self.pool = BufferPool(batch_size + BATCH_SLACK)
        self.freed = threading.Condition(lock)

    cdef inline Py_ssize_t pooled(self):
        # Each idle storage in the pool counts as the batch_size it reserved.
        return len(self.pool) * self.batch_size

    cdef int try_reserve(self, Py_ssize_t need, bint take_pooled) except -1:
        # 2: a pooled storage's batch_size share is reserved (take it: pool.acquire()), with take_pooled when
        # there is one; 1: `need` bytes are reserved; 0: memory is short.
        if take_pooled and len(self.pool):
            self.used += self.batch_size
            return 2
        if self.used + need <= self.buffer_memory or self.used == 0:
            self.take(need)
            return 1
        return 0

    cdef bytearray take_pooled_for(self, ProducerBatch batch):
        # Idle storage of a finished batch for an open batch that outgrew its reservation (None: none idle);
        # the batch takes its batch_size share of the memory in place of the reservation it had.
        cdef bytearray storage = self.pool.acquire()
        if storage is not None:
            self.used += self.batch_size - batch.reserved
            batch.reserved = self.batch_size
        return storage

    cdef int take(self, Py_ssize_t need) except -1:
        # Idle pooled storage gives way to new batches: together they stay within buffer_memory.
        while self.used + self.pooled() + need > self.buffer_memory and self.pool.drop():
            pass
        self.used += need
        return 0

    cdef int release(self, Py_ssize_t amount) except -1:
        # Gives back memory reserved for nothing.
        self.used -= amount
        self.wake_waiters()
        return 0

    cdef int give_back(self, ProducerBatch batch, bint closing) except -1:
        # A batch is done: its reservation returns. The storage of a batch that grew to batch_size (not an
        # oversized record's: more than the pool's capacity) is kept for the next batch (a send waiting for
        # memory takes it), unless none will come.
        cdef bytearray storage
        self.used -= batch.reserved
        storage = batch.take_storage()
        if (self.batch_size <= batch.reserved <= self.batch_size + BATCH_SLACK and not closing
                and self.used + self.pooled() + self.batch_size <= self.buffer_memory):
            self.pool.release(storage)
        storage = None
        batch.reserved = 0
        self.wake_waiters()
        return 0

    cdef inline int wake_waiters(self) except -1:
        # Condition.notify_all is Python code: every finished batch would pay for it, so it runs only when a
        # send waits (a waiter is counted, under the lock, before it waits).
        if self.waiting:
            self.freed.notify_all()
        return 0
