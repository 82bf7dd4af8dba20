# cython: language_level=3
"""The producer accumulator's buffer memory: what its batches reserve and the storage it recycles (see
buffer_memory.pyx)."""
from fastmq._native.buffer cimport BufferPool
from fastmq._native.producer_batch cimport ProducerBatch

cdef enum:
    BATCH_SLACK = 64            # capacity a batch's storage has beyond the bytes it reserves


cdef class BufferMemory:
    cdef readonly Py_ssize_t buffer_memory  # bytes all unfinished batches may hold
    cdef readonly Py_ssize_t used           # bytes held now
    cdef Py_ssize_t batch_size              # a full batch's bytes: what a pooled storage counts as
    cdef BufferPool pool                    # storage of finished batches, for the next ones
    cdef object freed                       # Condition on the accumulator's lock: memory was released
    cdef int waiting                        # threads blocked in send() for memory

    cdef Py_ssize_t pooled(self)
    cdef int try_reserve(self, Py_ssize_t need, bint take_pooled) except -1
    cdef bytearray take_pooled_for(self, ProducerBatch batch)
    cdef int take(self, Py_ssize_t need) except -1
    cdef int release(self, Py_ssize_t amount) except -1
    cdef int give_back(self, ProducerBatch batch, bint closing) except -1
    cdef int wake_waiters(self) except -1
