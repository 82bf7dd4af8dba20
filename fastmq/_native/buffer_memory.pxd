# cython: language_level=3
"""The producer accumulator's buffer memory: what its batches reserve, and the arena their storage comes from (see
buffer_memory.pyx)."""
from fastmq._native.arena cimport Arena
from fastmq._native.producer_batch cimport ProducerBatch


cdef class BufferMemory:
    cdef readonly Py_ssize_t buffer_memory  # bytes all unfinished batches may hold
    cdef readonly Py_ssize_t used           # bytes held now
    cdef readonly Arena arena               # where every batch's storage comes from
    cdef object freed                       # Condition on the accumulator's lock: memory was released
    cdef int waiting                        # threads blocked in send() for memory
    cdef Py_ssize_t in_flight               # batches in requests awaiting answers (which free their memory)

    cdef bint try_reserve(self, Py_ssize_t need) except -1
    cdef int release(self, Py_ssize_t amount) except -1
    cdef int give_back(self, ProducerBatch batch) except -1
    cdef int wake_waiters(self) except -1
