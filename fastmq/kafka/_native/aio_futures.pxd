# cython: language_level=3
"""The asyncio futures of sent records (see aio_futures.pyx), declared for aio_send.pyx, which tracks each record
it sends by a C call."""
from fastmq._native.producer_batch cimport FutureRecordMetadata


cdef class PartitionFutures:
    cdef list records
    cdef list futures
    cdef Py_ssize_t head
    cdef bint watched

    cdef Py_ssize_t count(self) noexcept
    cdef int drop_settled(self) except -1


cdef class RecordFutures:
    cdef readonly object handoff
    cdef object loop
    cdef dict partitions
    cdef readonly object progress
    cdef readonly Py_ssize_t sends_swept

    cpdef object track(self, FutureRecordMetadata record)
    cdef int _watch(self, FutureRecordMetadata record, object tp, PartitionFutures pending) except -1
    cdef int _settle_done(self, PartitionFutures pending) except -1
