# cython: language_level=3
"""The asyncio futures of sent records (see aio_futures.pyx), declared for aio_send.pyx, which tracks each record
it sends by a C call."""
from fastmq._native.producer_batch cimport FutureRecordMetadata


cdef class PartitionFutures:
    cdef list records                   # fastmq FutureRecordMetadata, in send order; unsettled from head on
    cdef list futures                   # their asyncio futures, one per record
    cdef Py_ssize_t head                # the first unsettled entry (those before it are None)
    cdef bint watched                   # a record of the partition carries the completion callback

    cdef Py_ssize_t count(self) noexcept
    cdef int drop_settled(self) except -1


cdef class RecordFutures:
    cdef readonly object handoff        # the LoopHandoff of the loop the futures belong to
    cdef object loop
    cdef dict partitions                # TopicPartition -> PartitionFutures
    cdef readonly object progress       # asyncio.Event, set whenever records were settled
    cdef readonly Py_ssize_t sends_swept    # settle passes that sends ran (every SWEEP_EVERY kept records)

    cpdef object track(self, FutureRecordMetadata record)
    cdef int _watch(self, FutureRecordMetadata record, object tp, PartitionFutures pending) except -1
    cdef int _settle_done(self, PartitionFutures pending) except -1
